"""The banks and retrieval encoder the settings name, read and checked before anything starts."""

from __future__ import annotations

from dialogue_ranker.serving.banks.bank_file import Bank, BankError, read_bank
from dialogue_ranker.serving.model_bundle import RetrieverSpec, find_retriever, load_retriever
from dialogue_ranker.serving.settings import Settings


def read_banks(settings: Settings) -> list[Bank]:
    """Every ``--bank``, read and checked.

    Raises:
        BankError: a file is missing or malformed (the message names it, the line and the field).
    """
    limit = settings.limits.max_text_chars
    return [read_bank(name, path, max_text_chars=limit) for name, path in settings.served_banks()]


def retriever_of(settings: Settings) -> RetrieverSpec:
    """The retrieval encoder: ``banks.retriever``, else the default model bundle's ``retriever/``.

    Raises:
        BankError: there is none there.
        BundleError: its ``retriever.json`` is malformed or names a missing file.
    """
    where = settings.banks.retriever or settings.served_models()[0][1]
    directory = find_retriever(where)
    if directory is None:
        raise BankError(
            f"--bank needs a retrieval encoder and {where} has none (no retriever.json, nor a retriever/ "
            "folder holding one): export one with `ranker export-retriever --bundle DIR`, or name one with "
            "--banks.retriever DIR"
        )
    return load_retriever(directory)


def check_banks(settings: Settings) -> list[Bank]:
    """The configured banks, once their files and the retrieval encoder's metadata are checked.

    Raises:
        BankError, BundleError: as :func:`read_banks` and :func:`retriever_of`.
    """
    if not settings.bank:
        return []
    retriever_of(settings)
    return read_banks(settings)
