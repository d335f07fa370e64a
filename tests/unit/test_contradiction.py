"""Contradicted reasons: a declining reply's reason found among its statements, said the other way."""

from __future__ import annotations

import pytest

from dialogue_ranker.training.converters.contradiction import negate, reason_statement


@pytest.mark.parametrize(
    ("statement", "opposite"),
    [
        ("The bike store is closed.", "The bike store is open."),
        ("The concert is canceled tonight.", "The concert is going ahead tonight."),
        ("[user]'s pen is out of ink.", "[user]'s pen has plenty of ink."),
        ("The music player is tangled up.", "The music player is not tangled up."),
        ("[user]'s stove is not working.", "[user]'s stove is working."),
        ("The coffee maker isn't working.", "The coffee maker is working."),
        ("There are no extra blankets in the house.", "There are some extra blankets in the house."),
        ("[user] has run out of coffee.", "[user] has not run out of coffee."),
        ("[user] has a broken camera.", "[user] does not have a broken camera."),
        ("[user] doesn't have keys.", "[user] has keys."),
        ("[user] does not have an umbrella.", "[user] has an umbrella."),
        ("There is nothing in the fridge.", "There is something in the fridge."),
    ],
)
def test_a_statement_is_said_the_other_way(statement: str, opposite: str) -> None:
    assert negate(statement) == opposite


@pytest.mark.parametrize(
    "statement", ["[user] never drives.", "The shop no longer sells bread.", "Rain falls."]
)
def test_a_statement_the_rules_cannot_turn_is_left_alone(statement: str) -> None:
    assert negate(statement) is None


def test_the_reason_is_the_relevant_statement_the_reply_s_first_clause_names() -> None:
    statements = (
        "It is noon.",
        "The store is closed.",
        "There is a bakery next door.",
        "The store sells cake.",
    )
    reply = "Sorry, but the store is closed. Shall I get a cake from the bakery next door?"
    # The offer ("bakery next door") shares as many words as the reason, but it is not the reason.
    assert reason_statement(reply, statements, relevant=(1, 2)) == "The store is closed."
    # Distractor statements are never the reason, however many words they share.
    assert reason_statement(reply, statements, relevant=(0, 2)) is None
    # Two relevant statements that name the reason alike: no one of them is it.
    assert (
        reason_statement(reply, ("The store is closed.", "The store is closed today."), relevant=(0, 1))
        is None
    )
