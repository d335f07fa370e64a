"""``ranker adapt``: a team's labelled lists to a fine-tuned, exported, calibrated and compared bundle."""
