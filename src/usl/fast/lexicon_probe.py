"""A fingerprint of how the criteria lexicon reads criteria, recorded in the fast CRM's weights.

The keyword reading (``criteria_lexicon``) and ``split_sign`` feed four trained parts: the criteria
tower's inputs, the length and domain readers and the length prior's fallback. Their weights learned
what that reading says; an edited regular expression changes it without changing a single weight. So
``usl train-fast`` records a hash of the reading of a fixed set of wordings (``lexicon_probe.txt``:
every wording of ``configs/criteria_sets.yaml`` and an evenly spaced sample of 560 of
``configs/length_wordings`` and ``configs/domain_wordings``), and ``FastCRM.load`` refuses weights whose
hash differs from the code's, and a keyword reader (``keyword_reader.py``) taught by another reading.

    >>> len(lexicon_fingerprint())
    16
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import numpy as np

from usl.fast import criteria_lexicon

PROBE = Path(__file__).with_name("lexicon_probe.txt")
REBUILD = "make judge (usl train-fast --config configs/fast_crm.yaml)"


def probe_wordings() -> list[str]:
    return [line for line in PROBE.read_text(encoding="utf-8").splitlines() if line.strip()]


def reading_fingerprint(wordings: list[str]) -> str:
    """sha256 (16 hex digits) of each wording's sign, the text ``split_sign`` leaves and its keyword
    features (rounded to 4 decimals, so a float's last bit does not count)."""
    # read through the module at each call: a test swaps a pattern's reading to see that weights refuse it
    parts = [criteria_lexicon.split_sign(w) for w in wordings]
    m = np.round(criteria_lexicon.lexicon_matrix([t for t, _ in parts]).astype(np.float64), 4) + 0.0  # -0.0 reads as 0.0
    h = hashlib.sha256("\x1f".join(criteria_lexicon.LEXICON_AXES).encode())
    for (text, sign), row in zip(parts, m):
        h.update(f"{sign:+.0f}\x1f{text}\x1f".encode())
        h.update(row.tobytes())
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def lexicon_fingerprint() -> str:
    """The fingerprint of this code's reading of the probe wordings (computed once per process, ~0.5 s)."""
    return reading_fingerprint(probe_wordings())


def check_fingerprint(recorded: str | None, where: str | Path) -> None:
    """Raise if weights were trained on another reading of criteria than this code's."""
    code = lexicon_fingerprint()
    if recorded is None:
        raise ValueError(f"{where}: the weights record no criteria-lexicon fingerprint, so what they learned from "
                         f"the keyword reading cannot be checked against this code's ({code}); rebuild them with "
                         f"`{REBUILD}`")
    if recorded != code:
        raise ValueError(f"{where}: the weights were trained on a criteria lexicon whose reading differs from this "
                         f"code's (fingerprint {recorded}, code {code}: criteria_lexicon.py or split_sign changed "
                         f"since); rebuild them with `{REBUILD}`")
