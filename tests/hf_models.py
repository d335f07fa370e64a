"""Real Hugging Face cross-encoder directories built offline, for the export tests.

The packaged MiniLM with a fresh one-logit head (a BERT), and tiny randomly initialised RoBERTa
(two-label head, no ``token_type_ids``, ``<s> A </s></s> B </s>``) and DeBERTa-v2 (relative
attention) models with tokenizers trained here on a few sentences. ``tiny_bert`` (not in
``BUILDERS``) is the cheapest three-input (``token_type_ids``) pair model, for the Triton tests.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers

CORPUS = [
    "It is so hot in here, can you help? Shall I open the window for you?",
    "Pizza is great. I forgot my password. Let me pull up your account and send a reset link.",
    "What is the capital of France? Paris is the capital and largest city of France.",
    "Do you like jazz? I do, especially the old recordings from the fifties and sixties. Do you?",
    "There is a fan in the closet. The user likes pizza. I do not know. One moment please.",
]


def minilm_with_fresh_head(out: Path) -> Path:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from dialogue_ranker.training.backbone import backbone_dir

    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(str(backbone_dir()), num_labels=1)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(str(backbone_dir())).save_pretrained(out)
    return out


def _bpe_tokenizer(specials: list[str]) -> Tokenizer:
    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=specials, show_progress=False)
    tokenizer.train_from_iterator(CORPUS * 4, trainer)
    return tokenizer


def tiny_roberta(out: Path) -> Path:
    import torch
    from transformers import PreTrainedTokenizerFast, RobertaConfig, RobertaForSequenceClassification

    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    tokenizer = _bpe_tokenizer(specials)
    tokenizer.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0), add_prefix_space=False)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", sep_token="</s>", cls_token="<s>",
        pad_token="<pad>", unk_token="<unk>", model_input_names=["input_ids", "attention_mask"],
    )  # fmt: skip
    torch.manual_seed(1)
    config = RobertaConfig(
        vocab_size=tokenizer.get_vocab_size(), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=48, max_position_embeddings=130, pad_token_id=1, bos_token_id=0, eos_token_id=2,
        num_labels=2, id2label={0: "irrelevant", 1: "relevant"}, label2id={"irrelevant": 0, "relevant": 1},
    )  # fmt: skip
    RobertaForSequenceClassification(config).eval().save_pretrained(out)
    fast.save_pretrained(out)
    return out


def _cls_sep_tokenizer():
    """The BPE tokenizer with BERT's special tokens and ``[CLS] A [SEP] B [SEP]`` pair template."""
    tokenizer = _bpe_tokenizer(["[PAD]", "[CLS]", "[SEP]", "[UNK]"])
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 1), ("[SEP]", 2)],
    )
    return tokenizer


def tiny_deberta_v2(out: Path) -> Path:
    import torch
    from transformers import DebertaV2Config, DebertaV2ForSequenceClassification, PreTrainedTokenizerFast

    tokenizer = _cls_sep_tokenizer()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]", unk_token="[UNK]"
    )
    torch.manual_seed(2)
    config = DebertaV2Config(
        vocab_size=tokenizer.get_vocab_size(), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=48, max_position_embeddings=128, type_vocab_size=0, relative_attention=True,
        position_buckets=32, pos_att_type=["p2c", "c2p"], pad_token_id=0, num_labels=1,
    )  # fmt: skip
    DebertaV2ForSequenceClassification(config).eval().save_pretrained(out)
    fast.save_pretrained(out)
    return out


def tiny_bert(out: Path) -> Path:
    """A tiny random BERT: ``[CLS] A [SEP] B [SEP]`` with ``token_type_ids`` 0 then 1, one logit.

    Initialised wide (``initializer_range`` 0.5) so that its logits differ by whole units between
    pairs, not by the 1e-5 of a default init.
    """
    import torch
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    tokenizer = _cls_sep_tokenizer()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]",
        unk_token="[UNK]", model_input_names=["input_ids", "token_type_ids", "attention_mask"],
    )  # fmt: skip
    torch.manual_seed(3)
    config = BertConfig(
        vocab_size=tokenizer.get_vocab_size(), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=48, max_position_embeddings=128, type_vocab_size=2, pad_token_id=0, num_labels=1,
        initializer_range=0.5,
    )  # fmt: skip
    BertForSequenceClassification(config).eval().save_pretrained(out)
    fast.save_pretrained(out)
    return out


BUILDERS = {"bert-minilm": minilm_with_fresh_head, "roberta": tiny_roberta, "deberta-v2": tiny_deberta_v2}
