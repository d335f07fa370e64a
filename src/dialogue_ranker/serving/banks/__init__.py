"""Response banks: candidate responses served from files, retrieved per request, then ranked.

- :mod:`.bank_file`: a bank's JSONL file, read and checked whole (at start and at each reload);
- :mod:`.encoder`: the retrieval encoder (ONNX Runtime) and a request's retrieval query;
- :mod:`.index`: the vectors in memory (int8) and exact search;
- :mod:`.text_vectors`: each text's vector under its digest, so no text is embedded twice;
- :mod:`.cache`: the vectors on disk, with their texts' digests, per bank and encoder;
- :mod:`.configured`: the banks and encoder the settings name;
- :mod:`.served`: a served bank, the version requests search, and its loads;
- :mod:`.versions`: a bank's next version, built whole off to the side;
- :mod:`.loader`: the served banks, embedded in the background at start, reloaded, searched per request;
- :mod:`.updates`: reloads on SIGHUP and when a watched file changes.
"""

from dialogue_ranker.serving.banks.bank_file import Bank, BankEntry, BankError, read_bank
from dialogue_ranker.serving.banks.configured import check_banks
from dialogue_ranker.serving.banks.loader import BankSet, Retrieved
from dialogue_ranker.serving.banks.served import BankState, BankVersion, LoadRecord, LoadTrigger, ServedBank
from dialogue_ranker.serving.banks.updates import BankUpdates

__all__ = [
    "Bank",
    "BankEntry",
    "BankError",
    "BankSet",
    "BankState",
    "BankUpdates",
    "BankVersion",
    "LoadRecord",
    "LoadTrigger",
    "Retrieved",
    "ServedBank",
    "check_banks",
    "read_bank",
]
