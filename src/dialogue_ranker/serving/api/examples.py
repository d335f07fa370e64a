"""OpenAPI examples: ``POST /rank`` (socialbot, situated, agent-action requests), ``POST /v1/feedback``."""

from __future__ import annotations

from fastapi.openapi.models import Example

RANK_EXAMPLES: dict[str, Example] = {
    "socialbot": {
        "summary": "Socialbot turn, candidates from several generators",
        "value": {
            "context": [
                {"speaker": "bot", "text": "I just watched a documentary about octopuses."},
                {"speaker": "user", "text": "Oh nice, are they really that smart?"},
            ],
            "candidates": [
                {"id": "r1", "text": "Yes! They can open jars and escape tanks.", "generator": "retrieval"},
                {"id": "g1", "text": "They are smart and have three hearts, too.", "generator": "generative"},
                {"id": "t1", "text": "Let's talk about something else.", "generator": "template"},
            ],
            "top_k": 2,
        },
    },
    "situated": {
        "summary": "Situated request (SUGAR): statements about the user's situation",
        "value": {
            "context": "Could you make some coffee for my sister?",
            "situations": [
                "The coffee has not been prepared.",
                "My sister just got out of bed.",
                "There is a coffee machine in the kitchen.",
                "It is summer now.",
            ],
            "candidates": [
                "Sure. The coffee is brewing now. Would she like breakfast too?",
                "Sure, I will make iced coffee since it is hot.",
                "I cannot do that.",
            ],
        },
    },
    "agent_action": {
        "summary": "Agent-action request (ABCD): intent turns on guideline masking",
        "value": {
            "context": [
                {"speaker": "customer", "text": "I forgot my password and cannot log in."},
                {"speaker": "agent", "text": "I can help. May I have your full name or account ID?"},
                {"speaker": "customer", "text": "Sure, it's Chloe Zhang."},
            ],
            "candidates": [
                {"id": "a", "text": "Pulling up your account now.", "action": "pull-up-account"},
                {"id": "b", "text": "I'll issue a refund for the order.", "action": "offer-refund"},
                {"id": "c", "text": "Thanks, one moment please."},
            ],
            "intent": "recover_password",
            "mask_mode": "hard",
        },
    },
}

#: OpenAPI examples of ``POST /v1/feedback``: a grade, a probability, a reward.
FEEDBACK_EXAMPLES: dict[str, Example] = {
    "grade": {
        "summary": "A rater's grade of a /rank candidate (0 bad, 1 acceptable, 2 best)",
        "value": {"request_id": "3f2a9c0d5e6b4f718293a4b5c6d7e8f9", "candidate_id": "r1", "label": 2},
    },
    "probability": {
        "summary": "A probability that the reply was appropriate",
        "value": {"request_id": "3f2a9c0d5e6b4f718293a4b5c6d7e8f9", "candidate_id": "g1", "label": 0.25},
    },
    "reward": {
        "summary": "A reward in [-1, 1] for a rerank document (by its index): the user took the reply",
        "value": {"request_id": "7694978697ac4286af7b16901708b663", "candidate_id": "0", "reward": 1.0},
    },
}
