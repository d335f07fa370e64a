"""``ranker export`` (``ranker export``): a training run to a served bundle.

The run is one of ``ranker train`` (a shared-prefix ranker); see :mod:`dialogue_ranker.export.shared_prefix`.
"""

from dialogue_ranker.export.shared_prefix import main

if __name__ == "__main__":
    main()
