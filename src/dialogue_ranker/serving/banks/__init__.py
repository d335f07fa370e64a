"""Response banks: candidate responses served from files, retrieved per request, then ranked.

- :mod:`.bank_file`: a bank's JSONL file, read and checked at start;
- :mod:`.encoder`: the retrieval encoder (ONNX Runtime) and a request's retrieval query;
- :mod:`.index`: the vectors in memory (int8) and exact search;
- :mod:`.cache`: the vectors on disk, keyed by the bank's texts and the encoder;
- :mod:`.configured`: the banks and encoder the settings name;
- :mod:`.loader`: the served banks, embedded in the background at start, searched per request.
"""

from dialogue_ranker.serving.banks.bank_file import Bank, BankEntry, BankError, read_bank
from dialogue_ranker.serving.banks.configured import check_banks
from dialogue_ranker.serving.banks.loader import BankSet, BankState, Retrieved, ServedBank

__all__ = [
    "Bank",
    "BankEntry",
    "BankError",
    "BankSet",
    "BankState",
    "Retrieved",
    "ServedBank",
    "check_banks",
    "read_bank",
]
