"""The quality term of the default judge: how good an answer is, whatever the user's criteria.

``bank`` stores a reader's readings of (query, answer, baseline) pairs, read once; ``gate`` weighs them
against the fast CRM's criteria reading, criterion by criterion; ``reader`` joins the two for a judge, with
the reader passed in (``usl.judges.fast`` chooses it). ``usl quality fill`` reads a benchmark's pairs ahead.
"""
