"""Pair sources for reward-model training data: one module per public data set.

Every source turns its files into :class:`~usl.data.pairs.base.Pair` records: a query, two
answers, and the criteria *family* under which the first answer wins (plus, where the data
supports it, the family under which the second one wins). Criteria wordings, splits, answer
positions and caps are the builder's business (:mod:`usl.data.build_train`), not the sources'.
"""
