"""Text banks for the generated traffic: socialbot topics, situated requests, agent-assist phrases.

Everything here is written for the load tests. The situated samples imitate SUGAR's shape (one
request, 12 statements, 3 candidates) and stand in for the real data when it is absent; they
carry no labels because a load test never scores quality.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Topic:
    """One socialbot conversation topic."""

    name: str
    bot: tuple[str, ...]
    user: tuple[str, ...]
    facts: tuple[str, ...]


TOPICS: tuple[Topic, ...] = (
    Topic(
        "movies",
        bot=(
            "I watched a great movie last night.",
            "Have you seen any good films lately?",
            "I think old black and white movies have a special charm.",
        ),
        user=(
            "I love science fiction movies.",
            "I mostly watch comedies with my family.",
            "Not really, I have been too busy to go to the cinema.",
            "Which one did you watch?",
        ),
        facts=(
            "the first feature-length film was made in 1906 in Australia.",
            "Toy Story was the first fully computer-animated feature film.",
            "the longest film ever released runs for more than 80 hours.",
            "movie theaters make most of their profit from popcorn.",
        ),
    ),
    Topic(
        "music",
        bot=(
            "I have been listening to a lot of jazz recently.",
            "Do you play any instruments?",
            "Music always puts me in a good mood.",
        ),
        user=(
            "I used to play the piano as a kid.",
            "I listen to rock music when I work out.",
            "Not really, I just listen to the radio.",
            "Who is your favorite singer?",
        ),
        facts=(
            "a grand piano has about 230 strings inside.",
            "the oldest known musical instrument is a flute made from bone.",
            "listening to music can lower your heart rate.",
            "the Beatles recorded their first album in a single day.",
        ),
    ),
    Topic(
        "sports",
        bot=(
            "Did you catch the game last weekend?",
            "I have been thinking about taking up running.",
            "Do you have a favorite team?",
        ),
        user=(
            "Yes, it was an amazing match!",
            "I play basketball with my friends on Sundays.",
            "I am not much of a sports fan, honestly.",
            "I support my home town football club.",
        ),
        facts=(
            "a marathon is exactly 42.195 kilometers long.",
            "basketball was invented in 1891 with a peach basket.",
            "golf balls have around 336 dimples.",
            "the Olympic flame is lit in Greece before every games.",
        ),
    ),
    Topic(
        "travel",
        bot=(
            "If you could travel anywhere, where would you go?",
            "I love hearing about trips people have taken.",
            "Do you prefer the beach or the mountains?",
        ),
        user=(
            "I would love to visit Japan one day.",
            "We went camping by the lake last summer.",
            "Mountains, definitely. I like hiking.",
            "I hate long flights though.",
        ),
        facts=(
            "France is the most visited country in the world.",
            "there are more than 7,000 islands in the Philippines.",
            "the shortest commercial flight lasts under two minutes.",
            "Iceland has no mosquitoes at all.",
        ),
    ),
    Topic(
        "cooking",
        bot=(
            "What did you have for dinner today?",
            "I have been trying to learn how to bake bread.",
            "Do you like to cook?",
        ),
        user=(
            "I made pasta with tomato sauce.",
            "I am terrible in the kitchen, to be honest.",
            "My grandmother taught me her soup recipe.",
            "I usually just order takeout.",
        ),
        facts=(
            "honey never spoils if it is stored properly.",
            "the world's most expensive spice is saffron.",
            "carrots were originally purple, not orange.",
            "pizza margherita was named after an Italian queen.",
        ),
    ),
    Topic(
        "pets",
        bot=(
            "Do you have any pets?",
            "I think dogs are such loyal companions.",
            "Cats or dogs, which do you prefer?",
        ),
        user=(
            "I have a cat named Mochi.",
            "We just adopted a puppy last month!",
            "I am allergic to cats, sadly.",
            "My kids keep asking for a hamster.",
        ),
        facts=(
            "cats sleep for around 13 to 16 hours a day.",
            "a dog's sense of smell is at least 10,000 times better than ours.",
            "goldfish can remember things for months, not seconds.",
            "rabbits can jump nearly a meter high.",
        ),
    ),
    Topic(
        "space",
        bot=(
            "I find space exploration fascinating.",
            "Did you see the photos from the new telescope?",
            "Would you ever want to go to space?",
        ),
        user=(
            "Yes, the pictures of the galaxies were beautiful.",
            "I would be too scared to go up there.",
            "I think we will live on Mars someday.",
            "How far away is the moon, actually?",
        ),
        facts=(
            "a day on Venus is longer than its year.",
            "the moon is moving about 3.8 centimeters away from Earth every year.",
            "there are more stars in the universe than grains of sand on Earth.",
            "footprints on the moon can last for millions of years.",
        ),
    ),
    Topic(
        "books",
        bot=(
            "Are you reading anything interesting at the moment?",
            "I just finished a mystery novel.",
            "Do you prefer paper books or e-books?",
        ),
        user=(
            "I am reading a fantasy series right now.",
            "I do not really have time to read anymore.",
            "Paper books, I like the smell of them.",
            "Can you recommend a good book?",
        ),
        facts=(
            "the most translated book after the Bible is Pinocchio.",
            "the largest library in the world holds over 170 million items.",
            "Agatha Christie's novels have sold around two billion copies.",
            "the first novel ever written is often said to be The Tale of Genji.",
        ),
    ),
)

TEMPLATE_REPLIES: tuple[str, ...] = (
    "That sounds fun! What do you like most about {topic}?",
    "I see. Tell me more about that.",
    "Sorry, I didn't quite catch that. Could you say it another way?",
    "Cool! By the way, do you want to talk about {other}?",
    "Ha, I never get tired of chatting about {topic}.",
    "Thanks for sharing that with me.",
)
NEURAL_OPENERS: tuple[str, ...] = (
    "Oh, nice!",
    "Honestly,",
    "Good question.",
    "Hmm,",
    "I totally get that.",
    "Wow,",
    "That reminds me,",
)
NEURAL_CLOSERS: tuple[str, ...] = (
    "What about you?",
    "Do you have a favorite?",
    "Would you like to hear more?",
    "",
    "Have you ever tried it yourself?",
)

# One SUGAR-like example: (request, 12 statements, 3 candidates).
SituatedSample = tuple[str, tuple[str, ...], tuple[str, str, str]]

SITUATED_SAMPLES: tuple[SituatedSample, ...] = (
    (
        "Could you order a pizza for dinner tonight?",
        (
            "It is 7 pm now.",
            "[user] is on a diet.",
            "There are vegetables in the fridge.",
            "[user] has a coupon for the pizza shop.",
            "It is raining outside.",
            "[user] has a cooking class tomorrow.",
            "The pizza shop closes at 9 pm.",
            "[user] is at home.",
            "[user]'s friends are coming over.",
            "There is a supermarket nearby.",
            "[user] likes spicy food.",
            "The oven is broken.",
        ),
        (
            "Sure. I'll order a large one with your coupon, enough for your friends too.",
            "Sure. Since you are on a diet, shall I add a salad to the order?",
            "No. You should cook the vegetables in the oven instead.",
        ),
    ),
    (
        "Can you remind me to water the plants?",
        (
            "It will rain this afternoon.",
            "The plants are on the balcony.",
            "[user] is leaving for a trip tomorrow.",
            "It is hot and dry today.",
            "[user] has a watering can in the garage.",
            "[user] has a meeting at 3 pm.",
            "The neighbor has a spare key.",
            "It is Monday.",
            "[user] is in the living room.",
            "The soil in the pots is dry.",
            "[user] bought new seeds last week.",
            "There is a garden hose outside.",
        ),
        (
            "Sure. It will rain this afternoon, so I'll remind you tomorrow morning before your trip.",
            "Sure. I'll remind you in ten minutes.",
            "No. The plants do not need water.",
        ),
    ),
    (
        "Could you play some music?",
        (
            "The baby is sleeping in the next room.",
            "[user] is cooking dinner.",
            "It is 10 pm now.",
            "The speaker is in the kitchen.",
            "[user] likes classical music.",
            "[user]'s headphones are charging.",
            "The neighbors complained about noise last week.",
            "[user] is alone in the kitchen.",
            "It is Friday.",
            "The TV is on.",
            "[user] has a concert ticket for Saturday.",
            "The window is open.",
        ),
        (
            "Sure. I'll play some quiet classical music so the baby can keep sleeping.",
            "Sure. Here is your party playlist at full volume.",
            "No. Music is not allowed in the kitchen.",
        ),
    ),
    (
        "Can you book a taxi to the airport?",
        (
            "[user]'s flight leaves at 6 am.",
            "It is 3 am now.",
            "[user] has two large suitcases.",
            "There is a train strike today.",
            "[user] is at home.",
            "[user] has a taxi app on the phone.",
            "It is snowing heavily.",
            "The airport is 40 minutes away.",
            "[user]'s passport is on the desk.",
            "[user] had coffee already.",
            "[user] is travelling with a friend.",
            "The car is in the repair shop.",
        ),
        (
            "Sure. A large taxi will pick you up at 4 am; it's snowing, so I added extra time.",
            "Sure. I'll book one for 5:45 am.",
            "No. You should take the train instead.",
        ),
    ),
    (
        "Could you turn on the heating?",
        (
            "It is 5 degrees outside.",
            "The windows in the bedroom are open.",
            "[user] just came home.",
            "[user] is wearing a wet coat.",
            "The heating has a timer.",
            "It is winter now.",
            "[user] has a sore throat.",
            "There is a blanket on the sofa.",
            "The electricity bill was high last month.",
            "[user] is in the living room.",
            "[user]'s parents are visiting tonight.",
            "The fireplace has wood next to it.",
        ),
        (
            "Sure. Heating is on; shall I remind you to close the bedroom windows?",
            "Sure. I'll set it to 30 degrees.",
            "No. It is summer now.",
        ),
    ),
    (
        "Can you find a recipe for pancakes?",
        (
            "There are no eggs in the fridge.",
            "[user] has flour and milk.",
            "It is Sunday morning.",
            "[user]'s kids are hungry.",
            "[user] is vegan.",
            "The frying pan is clean.",
            "[user] has blueberries.",
            "The grocery store opens at 10 am.",
            "[user] is in the kitchen.",
            "It is 8 am now.",
            "[user] has maple syrup.",
            "[user] is allergic to nuts.",
        ),
        (
            "Sure. Here is an egg-free pancake recipe with flour, plant milk and blueberries.",
            "Sure. Here is a classic recipe with three eggs and almond flour.",
            "No. You should buy pancakes at the store.",
        ),
    ),
)

CUSTOMER_NAMES: tuple[str, ...] = ("Chloe Zhang", "Alex Rivera", "Sam Okafor", "Priya Nair", "Jordan Lee")

#: The customer's first turn per intent of the shipped guidelines; other intents get a generic one.
CUSTOMER_OPENERS: dict[str, tuple[str, ...]] = {
    "track_order": (
        "Where is my order? It was supposed to arrive yesterday.",
        "Can you tell me when my package arrives?",
    ),
    "cancel_order": ("I need to cancel an order I placed this morning.", "Please cancel my last order."),
    "return_item": ("I want to return a jacket, it does not fit.", "How do I send back an item I bought?"),
    "change_delivery_address": (
        "I moved and need to change the delivery address.",
        "Can the order go to my office instead?",
    ),
    "update_billing": ("My credit card expired, I need to update it.", "I want to change my payment card."),
    "reset_login": (
        "I forgot my password and cannot log in.",
        "My account is locked after too many attempts.",
    ),
    "close_account": (
        "I would like to close my account.",
        "Please delete my account, I don't use it anymore.",
    ),
    "report_damaged_item": ("The lamp I ordered arrived broken.", "My package came with a cracked screen."),
    "ask_store_hours": ("What time does the store open on Sunday?", "Are you open late tonight?"),
}
AGENT_TURNS: tuple[str, ...] = (
    "I can help with that. May I have your full name or account ID?",
    "Thanks for waiting. Could you confirm the email on the account?",
    "Sorry to hear that. Let me take a look.",
)
CUSTOMER_FOLLOW_UPS: tuple[str, ...] = (
    "Sure, it's {name}.",
    "My order number is {order}.",
    "The email is {email}.",
    "Thanks, I'll wait.",
)
ACTION_PHRASES: tuple[str, ...] = (
    "Okay, I'll {action} now.",
    "One moment, I'm going to {action} for you.",
    "Let me {action} first.",
)
PLAIN_AGENT_REPLIES: tuple[str, ...] = (
    "Thanks, one moment please.",
    "Is there anything else I can help you with?",
    "I understand, that must be frustrating.",
    "Could you repeat that, please?",
)
#: Actions no guideline file here uses: they are masked as ``unknown_action``.
UNKNOWN_ACTIONS: tuple[str, ...] = ("escalate-to-supervisor", "offer-gift-card")
