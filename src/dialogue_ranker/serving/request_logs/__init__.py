"""Request and feedback logs (``--logs.dir``, off by default): the lines a team fine-tunes on.

- :mod:`.lines`: the line format (a request line, a feedback line), digests, rewards as labels;
- :mod:`.files`: the files of one kind, rotated by size, the oldest deleted past a count;
- :mod:`.writer`: one thread writing them from a bounded queue (the event loop never waits);
- :mod:`.recent`: the recent requests' ids, that feedback is checked against;
- :mod:`.logs`: :class:`RequestLogs`, what the ranker and the feedback route call.

The reader that joins requests and feedback into labelled ranking lists is in the data layer
(:mod:`dialogue_ranker.data.feedback_logs`).
"""

from dialogue_ranker.serving.request_logs.logs import LogsError, RequestLogs, check_logs

__all__ = ["LogsError", "RequestLogs", "check_logs"]
