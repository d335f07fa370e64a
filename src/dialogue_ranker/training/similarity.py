"""The similarity term: a fine-tuned ranker plus a weight times the untrained encoder's cosine.

all-MiniLM-L6-v2 was trained as a sentence encoder on a billion sentence pairs, replies to posts
among them: the cosine of a reply's mean-pooled embedding with the latest turn's tells an
unrelated reply from a fitting one well (DailyDialog++ dev, 1,028 lists: AUC 0.86 against random
replies, where the fine-tuned ranker has 0.79). Fine-tuning the ranker on a few thousand lists
wears that knowledge away, and every negative mix that taught it back cost the adversarial AUC
(README, Training). So the exported graph keeps a frozen copy of the untrained encoder beside the
ranker and adds ``weight x cosine`` to each candidate's logit; the weight is fitted, with the
ranker frozen, by logistic regression on pairs of candidates within dev lists (``fit_weight``).

The copy reads the similarity sequence of :mod:`dialogue_ranker.serving.list_encoding` (the latest turn's text
and each candidate as separate blocks), not the ranker's: about 20 tokens a block, so it adds a
third or so to the ranker's compute, and nothing is trained again.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from transformers import AutoModel

from dialogue_ranker.serving.list_encoding import SIMILARITY_INPUT_NAMES, EncodedList, ListEncoder
from dialogue_ranker.training.shared_prefix import INPUT_NAMES, SharedPrefixRanker, attention_bias, to_tensors


class SimilarityRanker(torch.nn.Module):
    """The ranker's token logits plus ``weight`` x the cosine of each candidate with the latest turn."""

    input_names = (*INPUT_NAMES, *SIMILARITY_INPUT_NAMES)

    def __init__(self, ranker: SharedPrefixRanker, sentence_encoder: torch.nn.Module, weight: float) -> None:
        super().__init__()
        self.ranker = ranker
        self.sentence_encoder = sentence_encoder
        self.register_buffer("weight", torch.tensor(float(weight)))

    @classmethod
    def load(cls, checkpoint, backbone, weight: float) -> SimilarityRanker:
        """A run's ranker checkpoint beside the untrained backbone directory."""
        return cls(
            SharedPrefixRanker.load(checkpoint),
            AutoModel.from_pretrained(str(backbone), add_pooling_layer=False),
            weight,
        )

    def cosines(
        self, ids: torch.Tensor, positions: torch.Tensor, segments: torch.Tensor, blocks
    ) -> torch.Tensor:
        """(sequences, blocks + 1): each block's mean-pooled state's cosine with block 0's."""
        hidden = self.sentence_encoder(
            input_ids=ids,
            token_type_ids=torch.zeros_like(ids),
            position_ids=positions,
            attention_mask=attention_bias(segments, torch.float32, blocks=True),
        ).last_hidden_state
        ks = torch.arange(0, blocks + 1, device=ids.device)
        member = (segments[:, None, :] == ks[None, :, None]).to(hidden.dtype)  # (S, K+1, L)
        # Mul and ReduceSum, not a MatMul, so that dynamic int8 leaves the pooling in fp32.
        pooled = (member[:, :, :, None] * hidden[:, None, :, :]).sum(2) / member.sum(-1, keepdim=True).clamp(
            min=1
        )
        unit = pooled / pooled.norm(dim=-1, keepdim=True).clamp(min=1e-6)
        return (unit * unit[:, :1, :]).sum(-1)

    def forward(  # noqa: D102
        self,
        input_ids,
        token_type_ids,
        position_ids,
        segment_ids,
        similarity_input_ids,
        similarity_position_ids,
        similarity_segment_ids,
    ):
        logits = self.ranker(input_ids, token_type_ids, position_ids, segment_ids)
        blocks = segment_ids.max().clamp(min=0)
        cos = self.cosines(similarity_input_ids, similarity_position_ids, similarity_segment_ids, blocks)
        # Candidate k's cosine onto each of its tokens (the prefix and padding get 0): a one-hot
        # product, not a gather, so a row without some block (a warm-up row of zeros) reads 0.
        ks = torch.arange(0, blocks + 1, device=segment_ids.device)
        member = ((segment_ids[:, :, None] == ks[None, None, :]) & (ks[None, None, :] > 0)).to(cos.dtype)
        return logits + self.weight * (member * cos[:, None, :]).sum(-1)


@torch.no_grad()
def candidate_cosines(
    model: SimilarityRanker,
    encoder: ListEncoder,
    requests: Sequence[Sequence[EncodedList]],
    *,
    batch_sequences: int = 16,
) -> list[np.ndarray]:
    """Each request's candidates' cosines with its latest turn (the term before its weight)."""
    model.eval()
    flat = [s for seqs in requests for s in seqs]
    out: list[float] = []
    for start in range(0, len(flat), batch_sequences):
        seqs = flat[start : start + batch_sequences]
        feeds = to_tensors(encoder, seqs, torch.device("cpu"), SIMILARITY_INPUT_NAMES)
        segments = feeds["similarity_segment_ids"]
        blocks = int(segments.max())
        cos = model.cosines(feeds["similarity_input_ids"], feeds["similarity_position_ids"], segments, blocks)
        for row, s in enumerate(seqs):
            out.extend(cos[row, 1 : 1 + s.candidates].tolist())
    sizes = np.cumsum([sum(s.candidates for s in seqs) for seqs in requests])[:-1]
    return np.split(np.asarray(out, dtype=np.float32), sizes)


def fit_weight(
    logits: Sequence[np.ndarray], cosines: Sequence[np.ndarray], gains: Sequence[Sequence[float]]
) -> dict[str, float]:
    """The cosine's weight in logit units, fitted on pairs within each list.

    For every two candidates of one list where one has the higher gain, logistic regression
    (scikit-learn, no intercept, nearly unregularised) of "the first is better" on the
    differences of their logits and cosines: a RankNet-style fit, as the term is used (to order
    one request's candidates). The weight is b / a, what the cosine is worth beside the ranker's
    logit. A pooled fit of "appropriate" over all candidates would also learn each file's base
    rate, which the cosine's spread across files confounds (1.78 pooled on SUGAR + Topical-Chat
    dev for 2.3.0's run, 3.2 on either file alone; within lists, 3.17).
    """
    differences = []
    for z, c, g in zip(logits, cosines, gains, strict=True):
        z, c, g = (np.asarray(v, dtype=np.float64) for v in (z, c, g))
        better, worse = np.nonzero(g[:, None] > g[None, :])
        differences.append(np.stack([z[better] - z[worse], c[better] - c[worse]], axis=1))
    pairs = np.concatenate(differences)
    if not len(pairs):
        raise ValueError("no list has two candidates of different gain: nothing to fit the weight on")
    # Each pair both ways round, so the two outcomes are balanced and no intercept is needed.
    features = np.concatenate([pairs, -pairs])
    outcomes = np.r_[np.ones(len(pairs)), np.zeros(len(pairs))]
    model = LogisticRegression(C=1e4, fit_intercept=False).fit(features, outcomes)
    a, b = (float(v) for v in model.coef_[0])
    if a <= 0:
        raise ValueError(f"the ranker's logit gets a non-positive coefficient ({a:.3f}) beside the cosine")
    return {"weight": b / a, "logit_coefficient": a, "cosine_coefficient": b, "pairs": int(len(pairs))}
