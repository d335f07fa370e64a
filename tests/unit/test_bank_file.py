"""Bank files: read in order with their optional fields; every bad line refused with file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest
from bank_helpers import write_bank

from dialogue_ranker.serving.banks import BankError, read_bank


def read(path: Path, *, max_text_chars: int = 2000):
    return read_bank("faq", path, max_text_chars=max_text_chars)


def test_a_bank_is_read_in_file_order_with_its_optional_fields(tmp_path: Path) -> None:
    path = write_bank(
        tmp_path / "faq.jsonl",
        [
            {"id": "a", "text": "Hello there."},
            {
                "id": "b",
                "text": "Pulling up your account.",
                "action": "pull-up-account",
                "generator": "macro",
            },
        ],
    )
    bank = read(path)
    assert (bank.name, bank.path, bank.size) == ("faq", path.resolve(), 2)
    assert [e.id for e in bank.entries] == ["a", "b"]
    assert (bank.entries[0].action, bank.entries[0].generator) == (None, None)
    assert (bank.entries[1].action, bank.entries[1].generator) == ("pull-up-account", "macro")


def test_blank_lines_are_skipped_and_still_counted(tmp_path: Path) -> None:
    path = write_bank(
        tmp_path / "faq.jsonl", [{"id": "a", "text": "Hi."}, "", "   ", '{"id": "a", "text": "x"}']
    )
    with pytest.raises(BankError, match=r"faq\.jsonl:4: id: 'a' is already the id of line 1"):
        read(path)


@pytest.mark.parametrize(
    ("lines", "line", "field"),
    [
        (['{"id": "a", "text": "Hi."}', '{"id": "b", "text": '], 2, "not valid JSON"),
        (['["a", "Hi."]'], 1, "expected a JSON object"),
        (['{"text": "Hi."}'], 1, "id: Field required"),
        (['{"id": "a"}'], 1, "text: Field required"),
        (['{"id": "a", "text": " \\u200b "}'], 1, "text: String should match pattern"),
        (['{"id": 7, "text": "Hi."}'], 1, "id: Input should be a valid string"),
        (['{"id": "", "text": "Hi."}'], 1, "id: String should have at least 1 character"),
        (['{"id": "a", "text": "Hi.", "action": 3}'], 1, "action: Input should be a valid string"),
        (['{"id": "a", "text": "Hi.", "actoin": "x"}'], 1, "actoin: Extra inputs are not permitted"),
        (['{"id": "a", "text": "Hi."}', '{"id": "b", "text": "' + "x" * 21 + '"}'], 2, "text: String should"),
    ],
)  # fmt: skip
def test_a_bad_line_is_refused_with_the_file_its_number_and_the_field(
    tmp_path: Path, lines: list[str], line: int, field: str
) -> None:
    path = write_bank(tmp_path / "faq.jsonl", lines)
    with pytest.raises(BankError) as error:
        read(path, max_text_chars=20)
    message = str(error.value)
    assert f"{path}:{line}: " in message and field in message and "'faq'" in message


def test_a_line_that_is_not_utf8_is_refused_with_its_number(tmp_path: Path) -> None:
    path = tmp_path / "faq.jsonl"
    path.write_bytes(b'{"id": "a", "text": "Hi."}\n{"id": "b", "text": "caf\xe9"}\n')
    with pytest.raises(BankError, match=r"faq\.jsonl:2: not UTF-8"):
        read(path)


def test_a_missing_file_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(BankError, match=r"bank 'faq': cannot read .*absent\.jsonl"):
        read(tmp_path / "absent.jsonl")


def test_a_file_without_responses_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BankError, match="holds no response"):
        read(write_bank(tmp_path / "faq.jsonl", ["", "  "]))


def test_the_texts_digest_follows_the_texts_only(tmp_path: Path) -> None:
    rows = [{"id": "a", "text": "Hello."}, {"id": "b", "text": "Bye.", "action": "end-call"}]
    base = read(write_bank(tmp_path / "a.jsonl", rows))
    relabelled = read(
        write_bank(tmp_path / "b.jsonl", [{**r, "id": r["id"] + "2", "action": "x"} for r in rows])
    )
    edited = read(write_bank(tmp_path / "c.jsonl", [rows[0], {**rows[1], "text": "Goodbye."}]))
    reordered = read(write_bank(tmp_path / "d.jsonl", rows[::-1]))
    assert base.texts_sha256 == relabelled.texts_sha256
    assert len({base.texts_sha256, edited.texts_sha256, reordered.texts_sha256}) == 3
