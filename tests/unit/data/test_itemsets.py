"""Populations of German words, URLs and emoji from registry data: what they hold and that
they are deterministic."""

from __future__ import annotations

import numpy as np

from fedhh.data.itemsets import emoji_items, german_words, sample_population, url_items


def test_the_item_distributions_hold_what_they_claim() -> None:
    german = german_words(limit=50_000)
    assert german.strings[:3] == ("die", "der", "und")
    assert {"für", "über", "können", "strasse"} <= set(german.strings)  # wordfreq casefolds ß
    assert all(w.isalpha() or "-" in w or "'" in w for w in german.strings)
    urls = url_items(max_domains=50, paths_per_domain=3)
    assert len(urls.strings) == 50 * 4 and all(u.startswith("https://") for u in urls.strings)
    assert "https://www.youtube.com/" in urls.strings and "https://m.in/" not in urls.strings
    emoji = emoji_items()
    assert {"😂", "❤️", "👍🏻", "🇩🇪"} <= set(emoji.strings)
    assert not any(e[0] in "\u200d\ufe0f" for e in emoji.strings)
    for table in (german, urls, emoji):
        assert np.all(np.diff(table.weights) <= 0) and len(set(table.strings)) == len(table.strings)


def test_sample_population_is_deterministic_and_well_formed() -> None:
    table = german_words(limit=1000)
    a = sample_population(table, 500, 10.0, seed=3, name="g")
    b = sample_population(table, 500, 10.0, seed=3, name="g")
    c = sample_population(table, 500, 10.0, seed=4, name="g")
    assert a.vocabulary == b.vocabulary and np.array_equal(a.items, b.items)
    assert not np.array_equal(a.items, c.items) or a.vocabulary != c.vocabulary
    assert a.num_users == 500 and int(a.counts.sum()) >= 500
    tokens = a.tokens_per_user()
    assert tokens.min() >= 1 and abs(tokens.mean() - 10.0) < 1.0  # Poisson(9) + 1: sd 0.13
    for u in range(a.num_users):
        row = a.items[a.indptr[u] : a.indptr[u + 1]]
        assert np.all(np.diff(row) > 0)
