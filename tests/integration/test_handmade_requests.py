"""Requests a new user would try, each with the reply any person would pick, on the shipped model.

Written by hand (not from any dataset): situated requests, open chat turns from a socialbot's
generators, and customer-service turns with an intent. Each case asserts that the person's pick
ranks first through ``POST /rank`` on the real model (ONNX Runtime, in process).

The service with model 2.10.0 gets 45 of the 52 right: 19 of the first 20, 15 of the 20
same-request pairs (2.9.0: 17 and 13; 2.8.0: 17 and 12) and 11 of the 12 unseen pairs (2.9.0: 9;
2.8.0: 7). 2.8.0 got 17 of the 20 right, as 2.7.0
did (the same graph: the reply's prior moves only the multi-turn requests' scores, none of
their picks): 2.6.0's 16 and the
cancellation request (2.6.0 got 16, as 2.5.1 did (the same graph; the seven multi-turn requests rank
the same with its last-turn view): 15 by the model, and 1 more because the repeat mask
(``ranking.mask_repeats``, on by default) removes a candidate that says a turn of the conversation
again; 2.5.0, the same weights in a coarser int8 graph, got 17: 16 and 1, the extra one the dinner
request, which the fp32 graph misses as 2.5.1 does; 2.4.0 got 18: 12 by the model, 6 by the mask;
2.3.1 got 16: 12 and 4; 2.2.0 got 16: 8 and 8; 2.1.0 got 14: 11 and 3; model 2.0.0 got 12 without
the mask, and of the first 13 cases 2.0.0 got 8 and 1.1.0 got 3)). Its misses are listed in
``KNOWN_MISSES`` and marked strict xfail: they are asserted like the others, reported as expected
failures, and a model that gets one right makes that case fail until the list is updated, so the
count in the README stays true.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import serve_in_process

from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.settings import Settings

pytestmark = pytest.mark.integration


def _case(name, context, candidates, pick, situations=(), intent=None):
    body = {"context": context, "candidates": candidates}
    if situations:
        body["situations"] = list(situations)
    if intent:
        body["intent"] = intent
    return pytest.param(body, pick, id=name)


def _turns(*texts, first="user"):
    other = {"user": "bot", "bot": "user"}
    speakers = [first]
    for _ in texts[1:]:
        speakers.append(other[speakers[-1]])
    return [{"speaker": s, "text": t} for s, t in zip(speakers, texts, strict=True)]


CASES = [
    _case(
        "hot-room",
        "It is so hot in here, can you help?",
        ["Shall I open the window for you?", "Pizza is great.", "I do not know."],
        0,
        situations=["The window is closed.", "There is a fan in the closet.", "The user likes pizza."],
    ),
    _case(
        "coffee-machine-broken",
        "Could you make me a coffee?",
        [
            "Sure, brewing your coffee in the machine now.",
            "The coffee machine is broken, shall I make you a tea instead?",
            "Coffee was first drunk in Yemen.",
        ],
        1,
        situations=["The coffee machine is broken.", "There is tea in the cupboard.", "It is morning."],
    ),
    _case(
        "baby-asleep",
        "Can you play some music?",
        [
            "Playing heavy metal at full volume!",
            "Sure, here is some quiet piano music at a low volume so the baby can keep sleeping.",
            "Music is a form of art.",
        ],
        1,
        situations=["The baby is asleep in the next room.", "It is evening."],
    ),
    _case(
        "rain-umbrella",
        "I am heading out to the store now.",
        [
            "Have fun!",
            "It is raining outside, don't forget to take your umbrella.",
            "Stores sell many things.",
        ],
        1,
        situations=["It is raining outside.", "The umbrella is by the door.", "The user has a car."],
    ),
    _case(
        "late-for-meeting",
        "Remind me, when is my meeting?",
        [
            "Your meeting with the team starts at 10 am, in twenty minutes.",
            "I love meetings.",
            "What is a meeting?",
        ],
        0,
        situations=["The user has a team meeting at 10 am.", "It is 9:40 am now."],
    ),
    _case(
        "dinner-allergy",
        "What should I cook for dinner tonight?",
        [
            "Try a peanut butter noodle dish!",
            "How about a stir-fry with the chicken and rice in your fridge?",
            "Dinner is the evening meal.",
        ],
        1,
        situations=[
            "The user is allergic to peanuts.",
            "There is chicken and rice in the fridge.",
            "It is Tuesday.",
        ],
    ),
    _case(
        "dark-room-reading",
        "I want to read my book.",
        [
            "Books are made of paper.",
            "Sorry, I can't.",
            "Shall I turn on the lamp on the desk so you can see?",
        ],
        2,
        situations=["The room is dark.", "The lamp is on the desk.", "The user is wearing glasses."],
    ),
    _case(
        "open-chat-trip",
        _turns("Hi! How was your weekend?", "Great, I just got back from a trip to Paris!", first="bot"),
        [
            "Oh nice, how was Paris? Did you get to see the Eiffel Tower?",
            "Hi! How was your weekend?",
            "I like turtles.",
        ],
        0,
    ),
    _case(
        "open-chat-dog",
        _turns("Do you have any pets?", "Yes, I have a golden retriever named Max.", first="bot"),
        [
            "The stock market fell by two percent today.",
            "Max is a lovely name! How old is he?",
            "Do you have any pets?",
        ],
        1,
    ),
    _case(
        "open-chat-movie",
        _turns("Have you seen any good movies lately?"),
        [
            "Yes, I recently watched a great science fiction film about space travel. Have you?",
            "Have you seen any good movies lately?",
            "My favourite vegetable is broccoli.",
        ],
        0,
    ),
    _case(
        "open-chat-sad",
        _turns("I failed my driving test today."),
        [
            "Congratulations!",
            "Oh no, I am sorry to hear that. Many people pass on their second try, you will get it.",
            "Driving tests are taken at the DMV.",
        ],
        1,
    ),
    _case(
        "open-chat-job",
        _turns("What do you do for a living?", "I am a nurse at the city hospital.", first="bot"),
        [
            "What do you do for a living?",
            "Bananas are rich in potassium.",
            "That must be demanding work. Do you often have night shifts?",
        ],
        2,
    ),
    _case(
        "open-chat-birthday",
        _turns("Today is my birthday!"),
        [
            "I am sorry for your loss.",
            "Happy birthday! Are you doing anything special to celebrate?",
            "Birthdays happen once a year.",
        ],
        1,
    ),
    _case(
        "open-chat-saxophone",
        _turns("What kind of music do you like?", "Mostly jazz. I play the saxophone.", first="bot"),
        [
            "Goodbye.",
            "Wow, how long have you been playing the saxophone?",
            "What kind of music do you like?",
        ],
        1,
    ),
    _case(
        "knowledge-snippet",
        _turns("Do you know anything about the Beatles?"),
        [
            "Yes! They were an English rock band from Liverpool, formed in 1960.",
            "I do not like cooking.",
            "Do you know anything about the Beatles?",
        ],
        0,
        situations=["The Beatles were an English rock band formed in Liverpool in 1960."],
    ),
    _case(
        "service-password",
        [
            {"speaker": "customer", "text": "I forgot my password and I cannot log in."},
            {"speaker": "agent", "text": "I can help. May I have your full name or account ID?"},
            {"speaker": "customer", "text": "Sure, it is Chloe Zhang."},
        ],
        [
            {"id": "refund", "text": "I will issue a refund for your order.", "action": "issue-refund"},
            {"id": "pull", "text": "Thanks Chloe, pulling up your account now.", "action": "look-up-account"},
            {"id": "weather", "text": "The weather is nice today."},
        ],
        "pull",
        intent="reset_login",
    ),
    _case(
        "service-shipping",
        [
            {"speaker": "customer", "text": "My order has not arrived, it was due last week."},
        ],
        [
            "I am sorry about the delay. Could you give me your order number so I can check its status?",
            "Our store opens at 9 am.",
            "Great, enjoy your purchase!",
        ],
        0,
    ),
    _case(
        "service-thanks",
        [
            {"speaker": "customer", "text": "Can I change the shipping address on my order?"},
            {"speaker": "agent", "text": "Done, the address is updated to 12 Oak Street."},
            {"speaker": "customer", "text": "Thank you so much!"},
        ],
        [
            "Can I change the shipping address on my order?",
            "You are welcome! Is there anything else I can help you with?",
            "Please provide your password.",
        ],
        1,
    ),
    _case(
        "service-cancel",
        [{"speaker": "customer", "text": "I would like to cancel my premium subscription."}],
        [
            "Thanks for upgrading your subscription!",
            "Our premium subscription includes free shipping.",
            "I can help with that. May I have your username so I can find your subscription?",
        ],
        2,
    ),
    _case(
        "service-exchange",
        [
            {"speaker": "customer", "text": "The shirt I received is the wrong size."},
            {"speaker": "agent", "text": "Sorry about that! Would you like an exchange or a refund?"},
            {"speaker": "customer", "text": "An exchange for a medium, please."},
        ],
        [
            "Would you like to hear about our new shoes?",
            "Sure, I will set up an exchange for a medium. Could I have your order ID?",
            "The shirt I received is the wrong size.",
        ],
        1,
    ),
]


def _situated_pair(name, request, situation, other_situation, fitting, careless, aside):
    """One request under two situations: one calls for the careless yes, the other for the reply
    that names the statement and offers the alternative (issue 46's kind of miss)."""
    candidates = [careless, fitting, aside]
    return [
        _case(f"{name}-declines", request, candidates, 1, situations=situation),
        _case(f"{name}-accepts", request, candidates, 0, situations=other_situation),
    ]


#: Same request, opposite situation: only the statements tell which reply fits. Written for model
#: the situation-contrastive stage before it was trained (none from SUGAR; docs/research).
SITUATED_PAIRS = [
    *_situated_pair(
        "dinner-shellfish",
        "What should I cook for dinner?",
        ["[user] is allergic to shellfish.", "There is chicken and rice in the fridge."],
        ["[user] loves seafood.", "There is shrimp, garlic and pasta in the kitchen."],
        "Since you are allergic to shellfish, how about a chicken stir-fry with the rice in the fridge?",
        "How about a shrimp and garlic pasta?",
        "Dinner is usually eaten in the evening.",
    ),
    *_situated_pair(
        "restaurant-monday",
        "Book me a table at Luigi's tonight.",
        ["Luigi's is closed on Mondays.", "Today is Monday."],
        ["Luigi's is open every evening until 11 pm.", "Today is Friday."],
        "Luigi's is closed on Mondays, so I can't book it tonight. Shall I book it for tomorrow instead?",
        "Done, your table at Luigi's is booked for tonight.",
        "Italian food is popular all over the world.",
    ),
    *_situated_pair(
        "flat-tyre",
        "I want to drive to work.",
        ["The car has a flat tyre.", "It is 8 am."],
        ["The car was serviced yesterday.", "The fuel tank is full."],
        "The car has a flat tyre, so it can't be driven now. Shall I call you a taxi to work instead?",
        "Great, the car is ready. Drive safely!",
        "Cars were invented in the nineteenth century.",
    ),
    *_situated_pair(
        "lake-storm",
        "Let's go for a swim at the lake.",
        ["A thunderstorm warning is in effect.", "The lake is a short walk away."],
        ["It is sunny and warm today.", "The lake is a short walk away."],
        "There is a thunderstorm warning, so the lake isn't safe today. How about the indoor pool instead?",
        "Perfect weather for the lake, let's go!",
        "Lakes are bodies of fresh water.",
    ),
    *_situated_pair(
        "train-strike",
        "When is the next train to the city?",
        ["The train drivers are on strike today.", "There is a bus stop near the house."],
        ["Trains to the city run every fifteen minutes today.", "The station is near the house."],
        "There are no trains today because of the drivers' strike. Shall I look up a bus to the city?",
        "The next train to the city leaves in ten minutes.",
        "Trains run on rails.",
    ),
    *_situated_pair(
        "car-keys-beer",
        "Can you get the car keys so I can drive home?",
        ["[user] has had three beers tonight.", "[user] is at a friend's party."],
        ["[user] has only had water tonight.", "[user] is at a friend's party."],
        "You have had three beers, so you shouldn't drive. Shall I call you a taxi home?",
        "Sure, here are your car keys. Drive safely!",
        "Keys are usually made of metal.",
    ),
    *_situated_pair(
        "vegan-lunch",
        "Can you suggest a lunch for me?",
        ["[user] is vegan.", "There are chickpeas and avocados in the kitchen."],
        ["[user] loves ham and cheese.", "There is bread, ham and cheese in the kitchen."],
        "Since you are vegan, how about a chickpea and avocado wrap?",
        "How about a ham and cheese sandwich?",
        "Lunch is the meal eaten at midday.",
    ),
    *_situated_pair(
        "printer-ink",
        "Please print my boarding pass.",
        ["The printer is out of ink.", "[user] has a smartphone."],
        ["The printer has plenty of ink and paper.", "[user] has a smartphone."],
        "The printer is out of ink, so I can't print it. Shall I send the boarding pass to your phone?",
        "Your boarding pass is printing now.",
        "Boarding passes show your seat number.",
    ),
    *_situated_pair(
        "call-dentist",
        "Can you set up a call with Anna at 3 pm today?",
        ["[user] has a dentist appointment at 3 pm today.", "[user] is free from 4 pm."],
        ["[user]'s afternoon is free today.", "Anna is free all afternoon."],
        "You have a dentist appointment at 3 pm. Shall I set up the call with Anna at 4 pm instead?",
        "Done, your call with Anna is set for 3 pm today.",
        "Anna is a common name.",
    ),
    *_situated_pair(
        "pharmacy-hours",
        "I need to pick up my prescription from the pharmacy now.",
        ["The pharmacy closes at 6 pm.", "It is 7 pm now."],
        ["The pharmacy is open until 9 pm.", "It is 5 pm now."],
        "The pharmacy closed at 6 pm. Shall I find a pharmacy nearby that is still open?",
        "The pharmacy is open, you can pick it up right away.",
        "Pharmacies sell medicine.",
    ),
]
CASES += SITUATED_PAIRS

#: Six more same-request pairs of issue 46's kinds (a car the garage grounded, an allergy, a strike,
#: ice on the roads, a holiday in the calendar, wine before driving), written on 2026-11-27, after
#: 2.10.0 shipped and before any later run, and used to choose no model or data: the closest thing to the
#: issue's "requests you have not seen". 2.10.0 ranks 11 of the 12 as a person would (2.9.0: 9;
#: 2.8.0: 7; docs/research/2026-11-27-more-written-situations.md).
UNSEEN_PAIRS = [
    *_situated_pair(
        "concert-drive",
        "Can you plan my drive to the concert tonight?",
        [
            "The engine warning light is on and the garage said not to drive the car.",
            "A shuttle bus runs from the station to the concert.",
        ],
        ["The car was checked at the garage this week.", "The concert hall has a car park."],
        "The garage said not to drive the car with the engine warning on. "
        "Shall I find the shuttle bus from the station instead?",
        "Here's your route: about forty minutes, and the concert hall has parking.",
        "Concerts are often loud.",
    ),
    *_situated_pair(
        "smoothie-strawberry",
        "Make me a strawberry smoothie.",
        ["[user] is allergic to strawberries.", "There are bananas and mangoes in the kitchen."],
        ["[user] loves strawberries.", "There are fresh strawberries and yoghurt in the fridge."],
        "You're allergic to strawberries, so how about a banana and mango smoothie instead?",
        "Here you go, a strawberry smoothie with yoghurt.",
        "Smoothies are blended drinks.",
    ),
    *_situated_pair(
        "museum-strike",
        "Get us two tickets for the science museum tomorrow.",
        [
            "The science museum staff are on strike tomorrow and it will be closed.",
            "The planetarium next door is open tomorrow.",
        ],
        ["The science museum is open tomorrow from 9 am.", "Tickets can be bought online."],
        "The science museum is closed tomorrow because of a staff strike. "
        "Shall I get tickets for the planetarium next door?",
        "Done, two tickets for the science museum tomorrow are in your email.",
        "Museums keep collections of objects.",
    ),
    *_situated_pair(
        "cycle-ice",
        "Let's cycle to the market this morning.",
        ["The roads are covered in ice this morning.", "A tram goes to the market."],
        ["The roads are dry and it is mild this morning.", "The bikes are in the shed."],
        "The roads are icy this morning, so cycling isn't safe. Shall we take the tram to the market?",
        "Lovely, I'll get the bikes out of the shed.",
        "Markets sell fresh food.",
    ),
    *_situated_pair(
        "design-meeting",
        "Put a meeting with the design team on Friday at 2 pm.",
        ["[user] is on holiday on Friday.", "The design team is free on Thursday at 2 pm."],
        ["[user] has nothing planned on Friday afternoon.", "The design team is free on Friday at 2 pm."],
        "You're on holiday on Friday. Shall I set the design meeting for Thursday at 2 pm instead?",
        "Done, the meeting with the design team is on Friday at 2 pm.",
        "Design teams make products look good.",
    ),
    *_situated_pair(
        "wine-driving",
        "Pour me another glass of wine.",
        ["[user] has to drive home in half an hour.", "There is sparkling water in the fridge."],
        ["[user] is staying the night and not driving.", "The bottle of red is open."],
        "You're driving home in half an hour, so how about a sparkling water instead?",
        "Here's another glass of the red. Cheers!",
        "Wine is made from grapes.",
    ),
]
CASES += UNSEEN_PAIRS

#: Cases the service with model 2.10.0 gets wrong (the person's pick is not first), and whether the
#: service abstains on the hot-room request. Update with the README's count when the model changes.
#: (2.9.0 also missed "coffee-machine-broken", "late-for-meeting", "dinner-shellfish-declines",
#: "train-strike-accepts" and "pharmacy-hours-accepts", and got "flat-tyre-declines" right; 2.8.0
#: also missed "lake-storm-accepts"; 2.6.0 and 2.5.1 "service-cancel".)
KNOWN_MISSES = {
    "dinner-allergy",
    # Same request, opposite situation (15 of the 20 right):
    "restaurant-monday-accepts",
    "flat-tyre-declines",
    "car-keys-beer-declines",
    "printer-ink-accepts",
    "call-dentist-accepts",
    # Unseen pairs (11 of the 12 right):
    "design-meeting-accepts",
}
#: 2.10.0 ranks the window first at 0.917, over the bundle's threshold (0.447), with "I do not
#: know." second at 0.224 (OpenVINO bf16, as `--backend auto` picks here). 2.9.0: 0.873 over 0.450
#: and 0.225. 2.8.0: 0.698 over 0.438 and "Pizza is great." at 0.421 (2.7.0: the same scores over
#: 0.413; 2.6.0: 0.733 over 0.432 and 0.607; 2.5.1: the same, threshold 0.426; 2.5.0: 0.751 over
#: 0.375 and 0.591; 2.4.0: 0.629 over 0.607 and 0.618; 2.3.1 ranked it first at 0.626, under its
#: threshold, 0.633.)
HOT_ROOM_ABSTAINS = False


def _with_known_misses(cases):
    marked = []
    for case in cases:
        if case.id in KNOWN_MISSES:
            reason = "model 2.10.0 does not rank the person's pick first"
            case = pytest.param(*case.values, id=case.id, marks=pytest.mark.xfail(strict=True, reason=reason))
        marked.append(case)
    return marked


@pytest.fixture(scope="module")
def results(model_dir: Path) -> dict:
    """Every case's response, from one in-process service on the shipped model."""
    import asyncio

    async def run() -> dict:
        settings = Settings(model=model_dir)  # the packaged ABCD guidelines
        out = {}
        async with serve_in_process(create_app(settings)) as client:
            for param in CASES:
                (body, _pick), name = param.values, param.id
                response = await client.post("/rank", json=body)
                assert response.status_code == 200, (name, response.text)
                out[name] = response.json()
        return out

    return asyncio.run(run())


def _picked_id(body: dict, pick) -> str:
    if isinstance(pick, str):
        return pick
    candidate = body["candidates"][pick]
    return candidate["id"] if isinstance(candidate, dict) else str(pick)


@pytest.mark.parametrize(("body", "pick"), _with_known_misses(CASES))
def test_the_person_s_pick_ranks_first(results, body, pick, request):
    name = request.node.callspec.id
    answer = results[name]
    top = answer["ranking"][0]
    assert top["id"] == _picked_id(body, pick), (name, answer["ranking"])


@pytest.mark.xfail(HOT_ROOM_ABSTAINS, strict=True, reason="the window ranks first, under the threshold")
def test_the_hot_room_request_does_not_abstain(results):
    """The window is a good answer: the service must not abstain on it."""
    assert results["hot-room"]["abstain"] is False, results["hot-room"]


@pytest.mark.xfail(strict=True, reason="model 2.10.0 ranks the non sequitur first (-1.88 against -2.39)")
def test_a_bare_hot_room_request_gets_the_window_over_a_non_sequitur(model_dir: Path) -> None:
    """Two candidates, no statements: the fitting offer must beat a reply about something else.

    Kept apart from ``CASES`` (whose count the README and the model card quote per version): found
    by trying the service by hand after 2.8.0 shipped, on ONNX Runtime and OpenVINO alike (2.8.0: -0.78
    against -1.20; 2.9.0: -1.86 against -2.57).
    """
    import asyncio

    candidates = ["I like trains.", "Shall I open the window for you?"]
    body = {"context": "It is so hot in here.", "candidates": candidates}

    async def rank() -> dict:
        async with serve_in_process(create_app(Settings(model=model_dir, backend="onnx"))) as client:
            response = await client.post("/rank", json=body)
            assert response.status_code == 200, response.text
            return response.json()

    answer = asyncio.run(rank())
    assert answer["ranking"][0]["id"] == "1", answer["ranking"]
