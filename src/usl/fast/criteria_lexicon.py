"""Keyword features of a criterion, to complement its sentence embedding.

Why: a small frozen sentence encoder embeds criteria by surface form ("I prefer an academic writing
style" sits next to "I prefer a business-oriented writing style"), so a head trained on a thousand
wordings does not carry over to new ones. The words people use for the common preference axes are
few and stable ("brief", "short", "to the point"; "thorough", "in depth"; "poetic", "vivid"), so a
signed count of each axis's words (negative inside a negation's scope) is a robust second view that generalises
to unseen wordings. Each feature is 0/1-ish; ``LEXICON_AXES`` names them in order.

The judge's heads do not take their keyword features from these rules: the keyword reader
(``keyword_reader.py``) learned their reading from ~40,000 texts they labelled, and gives the features in
their place. What this module still does: label those texts; give the fast CRM and the length and domain
readers the keyword features of their training texts (``lexicon_matrix``; ``lexicon_probe`` fingerprints
it); and read a criterion's sign (``split_sign``), which the judge still reads by rule, with these
features for a criterion that opens with a negation or names a fault.
"""

from __future__ import annotations

import functools

import re

import numpy as np

from usl.fast.text_polarity import polarity

_AXES: dict[str, tuple[str, ...]] = {
    "short": ("concise", "brief", "short", "succinct", "terse", "to the point", "compact", "lean",
              "few words", "quick", "summar", "crisp", "tl;dr", "minimal", "straight to", "no fluff",
              "less is more", "not long", "one sentence", "a sentence or two", "skip the background",
              "sentence or two", "two sentences", "few sentences", "single sentence", "one line", "one-liner",
              "a line or two", "few lines", "bite-sized", "snappy", "punchy", "essentials", "bare bones",
              "nutshell", "quick answer", "shorter", "economical", "digestible", "only what", "gist",
              "headline", "tweet", "pithy", "laconic", "condens", "abridged", "abbreviated", "sound bite",
              "elevator pitch", "in brief", "fewer words", "streamlined", "brevity", "economy of words",
              "just the answer", "as little as possible", "less text", "tldr", "superficial", "shallow", "skimpy",
              "scant", "curt", "clipped", "text message", "sticky note", "post it", "less is better",
              "one screen", "phone screen", "as few words", "bare minimum", "minimum needed", "minimum necessary",
              "fewest words", "fewest possible words", "only the answer", "the answer itself", "nothing else",
              "nothing more", "yes or no", "save space", "saving space", "halfway", "half answer",
              "half finished", "unfinished", "incomplete", "gloss over", "skim over", "glossing over",
              "skimming over", "glosses over", "skims over"),
    "long": ("detail", "thorough", "in depth", "in-depth", "comprehensive", "long", "elaborat", "extensive",
             "exhaustive", "complete", "expand", "full picture", "everything", "deep", "depth", "explain fully",
             "cover all", "leave nothing out", "more context", "background", "lengthy", "verbose", "wordy",
             "rambl", "long-winded", "wall of text", "walls of text", "fluff", "filler", "pad", "waffl",
             "tangent", "essays", "longer", "nuance", "at length", "full story", "long version", "blog",
             "expansive", "in full", "walk me through", "all the details", "preamble", "long form", "much text",
             "every angle", "every aspect", "all aspects", "backstory", "as much space", "more words", "extended",
             "essay", "chapter", "treatise", "bloat", "verbosity", "side note", "extra tips", "extras", "every step",
             "each step", "many words", "lots of words", "a lot of text", "lots of text", "from the ground up",
             "explain more", "reasoning behind", "whys and hows", "how you got there", "nitty gritty",
             "more is more", "more is better", "the more the better"),
    "academic": ("academ", "scholar", "research", "scientific", "theory", "theoret", "rigor", "evidence",
                 "citation", "cite", "formal", "technical", "precise", "journal", "university", "professor",
                 "jargon"),  # specialist words: "No jargon" turns them down, it does not turn down plainness
    "business": ("business", "professional", "corporate", "practical", "actionable", "industry", "market",
                 "commercial", "roi", "customer", "strategy", "manager", "executive", "workplace"),
    "literary": ("poet", "poem", "literar", "literature", "creative", "vivid", "imagery", "metaphor", "story",
                 "narrative", "lyrical", "expressive", "artistic", "rhyme", "verse", "novel", "imaginative",
                 "figurative", "whimsical", "flowery", "beautiful language", "evocative"),
    "fun": ("fun", "humor", "humour", "funny", "joke", "witty", "playful", "entertain", "lighthearted",
            "light-hearted", "amusing", "enthusias", "exciting", "lively", "energetic", "cheerful", "emoji",
            "excite", "engaging", "casual"),
    "plain": ("plain", "simple", "everyday", "layman", "no jargon", "easy to understand", "neutral",
              "normal", "ordinary", "straightforward", "accessible", "beginner", "child", "kid"),
    "structure": ("bullet", "list", "heading", "header", "structur", "markdown", "table", "numbered", "outline",
                  "skimmable", "organiz", "organis", "format", "step-by-step", "step by step", "steps"),
    "prose": ("prose", "paragraph", "flowing", "essay", "narrative", "no list", "no bullet", "sentences"),
    "examples": ("example", "instance", "illustrat", "concrete", "case stud", "sample"),
    "safe": ("safe", "harmless", "ethic", "refuse", "responsib", "respectful"),
    "helpful": ("helpful", "useful", "accura", "correct", "relevant", "factual", "true", "quality", "answer the",
                "follow", "instruction", "solve", "informative", "reliable", "trust"),
    "warm": ("friendly", "warm", "empath", "kind", "polite", "personable", "caring", "supportive", "courteous"),
    "ai": ("as an ai", "ai ", "machine", "disclaimer", "language model", "caveat", "hedg"),
    "question": ("question", "ask me", "follow-up", "follow up", "clarif"),
    "code": ("code", "program", "python", "snippet", "function", "sql", "script"),
}
# Faults: what no one asks for. A criterion that names one is about the axis's virtue whatever its
# grammar ("Avoid: toxic content", "Don't encourage harmful behaviour", "Discourage illegal actions",
# "Refuse when a request is harmful" all ask for safety), so a fault counts for its axis inside a
# negation's scope and outside it alike. The style axes have no faults: "long" is a fault for one
# user and a wish for another.
_FAULTS: dict[str, tuple[str, ...]] = {
    "safe": ("harm", "harms", "harmful", "harming", "toxic", "toxicity", "danger", "dangerous", "illegal",
             "unsafe", "unethical", "offensive", "hurtful", "abuse", "abusive", "violence", "violent", "crime",
             "crimes", "criminal", "insult", "insults", "insulting", "rude", "hateful", "hate speech",
             "discriminat", "racist", "sexist", "self harm"),
    "helpful": ("irrelevant", "off topic", "evasive", "unhelpful", "inaccurate", "inaccuracy", "inaccuracies",
                "incorrect", "false", "falsehood", "misleading", "wrong", "error", "errors", "mistake", "mistakes",
                "made up", "fabricat", "hallucinat", "misinformation", "untrue", "nonsense", "ignore the question",
                "ignores the question", "ignoring the question", "dodge the question", "dodges the question"),
}
_FAULT_STEMS = ("discriminat", "fabricat", "hallucinat")  # match any ending
_FAULT_RES = {axis: re.compile(r"\b(?:" + "|".join(sorted((re.escape(w) + (r"\w*" if w in _FAULT_STEMS else "")
                                                           for w in ws), key=len, reverse=True)) + r")\b")
              for axis, ws in _FAULTS.items()}


def axis_words() -> list[str]:
    """Every word and phrase the axes and faults list (stems such as "elaborat" included), sorted: what the
    keyword reader's training texts say in frames (``usl.fast.keyword_reader``)."""
    return sorted({w.strip() for ws in (*_AXES.values(), *_FAULTS.values()) for w in ws})


def dislikes_only_faults(disliked: str) -> bool:
    """Whether a disliked text names a fault and nothing a style axis reads ("unethical
    suggestions", "encourage harmful behaviour"; not "long, error-prone answers"). Disliking a
    fault is wishing for the virtue: ``split_sign`` reads such a criterion as a wish, whole."""
    low = _HYPHEN.sub(" ", disliked.lower().replace("\u2019", "'"))
    if not any(r.search(low) for r in _FAULT_RES.values()):
        return False
    f = lexicon_features(disliked)
    return not any(v for axis, v in zip(_AXES, f) if axis not in _FAULTS)


# Words that turn the next few words into something disliked ("too long", "I don't need the
# background", "annoyed by overly detailed answers").
_NEGATORS = {"no", "not", "don't", "dont", "never", "without", "avoid", "skip", "less", "stop", "hate", "dislike",
             "dislikes", "annoyed", "annoying", "annoys", "too", "overly", "excessive", "excessively",
             "unnecessary", "needless", "nothing", "instead", "cut", "drop", "trim", "ditch", "remove", "eliminate",
             "nor", "isn't", "aren't", "doesn't",
             "won't", "can't", "neither", "minus", "spare", "tired", "sick", "against", "zero", "hates", "nobody",
             "noone", "penalize", "penalise", "penalizes", "penalises", "penalized", "penalised", "punish"}
# Negators that say "more than wanted" whatever else negates them: "I don't want answers that are too long"
_EXCESS = {"too", "overly", "excessive", "excessively", "unnecessary", "needless"}
# Idioms read before the negation scope: double negations that mean "more" ("don't hold back on
# detail", "I don't mind long answers") and set phrases of the length axis ("cut to the chase").
_NEG = r"(?:don'?t|do not|never|wouldn'?t|won'?t|doesn'?t|does not)"
_DOUBLE_NEGATIONS = (
    (re.compile(rf"\b{_NEG} (?:hold (?:anything |it )?back|skimp|cut corners|shy away from)\b|\bhold nothing back\b|"
                r"\bspare no\b|\bleave nothing out\b|\bnothing left out\b|\bno detail is too small\b|"
                r"\bcan'?t get enough\b|\bspell (?:it|everything|things) out\b|\bleave no stone unturned\b|"
                r"\bthe whole story\b"), " in depth "),
    (re.compile(rf"\b{_NEG} (?:leave out|leave anything out|omit|miss out)\b|\bwithout omitting\b"), " include "),
    (re.compile(rf"\b{_NEG} mind\b|\b(?:fine|ok|okay|happy) with\b"), " like "),
)
_PHRASES = (
    (re.compile(r"\btl;? ?dr\b"), " tldr "),  # before ";" splits it into clauses
    # free of specialist words, or few of them, is plain: "jargon-free", "free of jargon", "minimal
    # jargon", "keep jargon to a minimum", "jargon should be avoided", "defines any jargon it uses"
    (re.compile(r"\b(?:jargon|buzzword)s?[- ]?free\b|\bfree (?:of|from) (?:\w+ )?(?:jargon|buzzwords?)\b"
                r"|\b(?:minimal|little|less|limited|reduced?|reducing|minimi[sz]e[ds]?|minimi[sz]ing|"
                r"cut(?:ting)? (?:down|back) on|steer(?:ing|s)? clear of|defin\w*|explain\w*|spell(?:s|ing)? out)"
                r" (?:(?:the|any|all|your|its) )?(?:\w+ )?jargon\b"
                r"|\bjargon (?:should|must|has to|needs to|is to) be (?:avoided|minimi[sz]ed|limited|kept to a minimum"
                r"|explained|defined)\b|\bkeep(?:s|ing)? (?:the )?jargon (?:to a minimum|low|out)\b"),
     " plain "),
    # words that hold "short" without meaning it: "I feel shortchanged"
    (re.compile(r"\bshort[- ]?chang\w*"), " cheated "),
    (re.compile(r"\bshortcomings?\b"), " flaws "),
    (re.compile(r"\bshortcuts?\b"), " tricks "),
    # "replies feel cut short": too short; "never cut an answer short": make it short
    (re.compile(r"\b(?:feel|feels|felt|seem|seems|are|is|get|gets|got) cut short\b"), " too short "),
    (re.compile(r"\bcut (?P<o>(?:\w+ ){1,2})short\b"), r"make \g<o>short"),
    # "more than you need", "longer than they should be": too long
    (re.compile(r"\b(?:more|longer) than (?:you |i |we |it |they |is |are )?"
                r"(?:absolutely |really |strictly |actually )?"
                r"(?:need|needs|needed|necessary|required|should|must|has to|have to)\b(?: to)?(?: be)?"),
     " too long "),
    (re.compile(r"\bno matter how\b"), " even if "),  # "no matter how long it gets" accepts long
    (re.compile(r"\b(?:and |then )?stop there\b|\bstop early\b|\band (?:then )?stop\b(?= *$| *[.;!?])"),
     " to the point "),
    (re.compile(r"\bstop(?:s|ping)? (?:at|after)\b"), " end with "),  # "don't stop at a summary": a limit
    (re.compile(r"\b(?:trim|cut|boil|pare|strip)(?: it| them| this| things| everything)? down to\b"), " keep to "),
    (re.compile(r"\b(?:time|room|space) to spare\b"), " time "),  # "spare" is no "spare me"
    (re.compile(r"\bjust (?:give me |tell me |say |state |answer with )?(?:the|a|your) "
                r"(?:core |actual |bare |direct |final )?"
                r"(?:answer|result|number|facts?|conclusion|verdict|bottom line|gist)\b"), " just the answer "),
    (re.compile(r"\bsmall (?=answers?\b|replies\b|reply\b|responses?\b)|\bstart small\b"), " short "),
    (re.compile(r"\bexplain (?:\w+ ){0,2}(?:fully|thoroughly|in full|completely|in detail)\b"), " explain fully "),
    (re.compile(r"\bmore rather than less\b"), " more is more "),
    (re.compile(r"\bless rather than more\b"), " less is more "),
    (re.compile(r"\bkeep going\b|\bgo further\b|\bgo beyond\b"), " expand "),
    (re.compile(r"\bcut to the chase\b|\bget to the point\b|\bbottom line\b|\bin a nutshell\b|"
                r"\bshort and sweet\b|\bat a glance\b|\bkeep it tight\b|\btight\b"), " to the point "),
    # "over-explained", "going on and on": the too-long part is in the word itself, so it reads as
    # "long" and the sentence's own negation ("don't", "I hate") decides the sign
    (re.compile(r"\bover[- ]?explain\w*|\bover[- ]?long\b|\bover[- ]?elaborat\w*|\bgo(?:es|ing)? on and on\b"),
     " long "),
    # "under-explained" is the too-short part in the word itself: "don't under-explain" likes long
    (re.compile(r"\bunder[- ]?explain\w*|\bunder[- ]?develop\w*"), " short "),
    (re.compile(r"\b(?:write|writing|writes) (?:me |us )?(?:a |an entire |a whole )?novels?\b"), " long "),
    # rhetorical questions complain: "Why are the answers always so brief?", "Does it really need to be that long?"
    # (a complaint says "so", "always", "that": "Why is a concise answer better?" is a real question)
    (re.compile(r"\bwhy (?:do|does|are|is|must|would|did)\b(?P<r>[^.?!;]*\b(?:so|always|such|that|this)\b[^.?!;]*)\?"),
     r" ; xnotx \g<r> ; "),
    (re.compile(r"\b(?:does|do|must|should) (?:it|they|you|answers|responses|replies|the answers?|the responses?) "
                r"(?:really |always |actually )?(?:need to|have to|got to|gotta) be "
                r"(?=so |that |this )(?P<r>[^.?!;]*)\?"),
     r" ; xnotx \g<r> ; "),
)
# Stated amounts: "under 100 words", "two sentences at most" ask for short answers; "at least 300
# words", "several paragraphs at least" for long ones. Read before the negation scope, so that
# "no more than three sentences" is one request for brevity, not a negated "more".
_AMOUNT = (r"(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|a few|a couple(?: of)?|a single|single|"
           r"several|many|a|an)")
_UNIT = (r"(?:words?|sentences?|lines?|paragraphs?|pages?|bullets?|bullet points?|points?|characters?|chars?|tokens?|"
         r"screens?|screenfuls?|seconds?|minutes?)")
_QUANTITIES = (
    (re.compile(rf"\b(?:no|not|never) (?:more|longer) than {_AMOUNT} (?:\w+ )?{_UNIT}\b|"
                rf"\b(?:at most|at the most|up to|under|fewer than|less than|no longer than|within|"
                rf"maximum(?: of)?|max) {_AMOUNT} (?:\w+ )?{_UNIT}\b|"
                rf"\b{_AMOUNT} (?:\w+ )?{_UNIT} (?:at most|at the most|max|maximum|tops|or less|or fewer)\b"),
     " short "),
    (re.compile(rf"\b(?:at least|at the least|more than|over|minimum(?: of)?|no fewer than|no less than|"
                rf"not less than|past|beyond|exceeding|exceeds?|longer than) {_AMOUNT} (?:\w+ )?{_UNIT}\b|"
                rf"\b{_AMOUNT} (?:\w+ )?{_UNIT} (?:at least|or more|minimum|plus)\b"),
     " long "),
    (re.compile(r"\b(?:a|one) (?:whole|full|entire|long) paragraph\b"), " long "),
    (re.compile(r"\b(?:one|two|three|a|a single|single|a couple of|couple of|a few|few|one or two|two or three|"
                r"[123])(?: short| brief| small)? (?:sentences?|lines?)\b|"
                r"\b(?:one|a|a single|single|one short|a short)(?: short| brief| small)? paragraph\b"
                r"(?! or (?:two|more))|"
                r"\b(?:one|two|three|four|five|six|seven|eight|nine|ten|a few|a couple of|a handful of)[ -]words?\b"),
     " short "),
    (re.compile(r"\b(?:a|one|two|several|a few) (?:hundred|thousand) words\b|\bhundreds of words\b|"
                r"\bthousands? of words\b"), " long "),
    (re.compile(r"\b(?:three|four|five|six|seven|eight|nine|ten|several|many|multiple|[3-9]|\d\d+)"
                r"(?: long| full| detailed)? (?:paragraphs|pages|screens)\b|\b(?:a|one|two|a couple of|a few)"
                r"(?: full| whole)? pages?\b|\bparagraph or (?:two|more)\b"),
     " long "),
    (re.compile(r"\b(\d+) words\b"), lambda m: " short " if int(m.group(1)) < 150 else " long "),
    (re.compile(r"\b(?:the )?less (?:i|you|one) (?:have to |need to |get to )?read\b|\bless to read\b|"
                r"\bless (?:reading|scrolling|text)\b|\bhalf the length\b"), " short "),
    (re.compile(r"\b(?:the )?more (?:i|you|one) (?:have to |need to |get to )?read\b|\bmore to read\b|"
                r"\bmore (?:reading|scrolling|text)\b|\btwice the length\b"), " long "),
    # "twice as long as they need to be": too long
    (re.compile(r"\b(?:twice|three times|much|way|far) (?:as long as|longer than) (?:it|they|you|needed|necessary)\b"),
     " too long "),
    # "err on the side of too long": the "too" is no dislike
    (re.compile(r"\berr(?:ing)? on the side of (?:being )?(?:too |overly )?"), " prefer "),
    (re.compile(r"\b(?:in|into) the weeds\b"), " in depth "),
    # reading time: "a quick read", "a 15-minute read", "answers that take a while to read"
    (re.compile(r"\b(?:quick|short|fast|one minute|1 minute|two minute|2 minute|30 second) read\b"), " short "),
    (re.compile(r"\b(?:long|slow|\d\d+[ -]minute|(?:five|ten|fifteen|twenty|thirty) minute) read\b|"
                r"\btakes? (?:a while|some time|time|a long time) to read\b"), " long "),
)
# Contrasts: "summaries over essays", "the gist rather than the full story", "I prefer a quick
# reply to a thorough one", "I'd rather have two lines than two pages". What is turned down becomes
# a clause of its own behind a "not", so the keyword reading signs it as a dislike.
# ("prefer X to Y" only where Y opens like a noun phrase: "prefer answers that stick to the task" is
# no contrast)
_DETERMINER = (r"(?:a|an|those|these|long|longer|short|shorter|lengthy|brief|detailed|thorough|quick|verbose|"
               r"wordy|concise|terse|extensive|in-depth)")
# "go over the steps", "gloss over details": "over" after these verbs is no contrast
_OVER_VERBS = {"go", "goes", "going", "look", "looks", "read", "think", "talk", "hand", "take", "pass", "turn", "get",
               "run", "check", "carry", "fall", "come", "move", "glance", "gloss", "skim", "skip", "mull", "pore",
               "watch", "start", "win", "all", "left", "it", "them", "things"}


def _goes_over(word: str) -> bool:
    """A verb that takes "over" as a particle ("go over", "skimming over"), in any form."""
    forms = {word}
    if word.endswith("s"):
        forms |= {word[:-1], word[:-2]}  # "looks", "glosses"
    if word.endswith("ing"):
        forms |= {word[:-3], word[:-3] + "e", word[:-4]}  # "looking", "taking", "skimming"
    if word.endswith("ed"):
        forms |= {word[:-2], word[:-1]}
    return bool(forms & _OVER_VERBS)


def _over_contrast(m: re.Match) -> str:
    return m.group(0) if _goes_over(m.group("a").split()[-1]) else f"{m.group('v')}{m.group('a')} ; not "


_CONTRASTS = (
    # "X is worse than Y": X is turned down
    (re.compile(r"(?:^|(?<=[.;!?]))\s*(?P<a>[^.;!?]+?)\s+(?:is|are|seem|seems|feel|feels)\s+(?:\w+\s+)?"
                r"(?:worse|lower|inferior|less (?:useful|helpful|valuable|good|important))\b[^.;!?]*?\s+than\s+"),
     r" not \g<a> ; "),
    # "X is more useful to me than Y", "X should be rated higher than Y": Y is turned down
    # (amounts, "more than three sentences", were read before)
    (re.compile(r"\b(?:more|better|higher|greater|preferable|superior)\b(?P<m>[^.;!?]{0,40}?)\s+than\s+"
                r"(?![0-9]|(?:one|two|three|four|five|six|seven|eight|nine|ten|a few|a couple|several|a handful)\b)"),
     r"\g<m> ; not "),
    (re.compile(r"\b(?:rather than|instead of|as opposed to|in place of)\b|"
                r"\b(?:matters?|counts?) more(?: to me| for me)? than\b|"
                r"\b(?:is|are) more important(?: to me| for me)? than\b"), " ; not "),
    (re.compile(r"\brather\b(?P<a>[^.;!?]*?)\bthan\b"), r"\g<a> ; not "),
    (re.compile(r"\b(?P<v>prefer|prefers|value|values|like|likes|want|wants|favou?r|favou?rs|care about)"
                r"(?P<a>\s+[^.;!?]+?)\s+more than\s+(?![0-9])"), r"\g<v>\g<a> ; not "),
    (re.compile(rf"\b(?P<v>prefer|prefers|favou?r|favou?rs)(?P<a>\s+(?!to\b)[^.;!?]+?)\s+to\s+(?={_DETERMINER}\b)"),
     r"\g<v>\g<a> ; not "),
    (re.compile(r"^(?P<a>[a-z][\w\s,'\-]{0,40}?)\s+(?P<c>over|beats?|trumps?|wins? over|wins? out over|>|"
                r"(?:is |are )?better than)\s+"
                r"(?P<b>[a-z][\w\s'\-]{0,40}?)\s*(?=[.!,;]|$)"),
     lambda m: m.group(0) if m.group("c") == "over" and _goes_over(m.group("a").split()[-1])
     else f"{m.group('a')} ; not {m.group('b')}"),
)
# "I'd take a two-line answer over a two-page essay", "favor compact answers over expansive ones":
# read before the amounts, where "over two pages" means "more than two pages"
_PREFERRED_OVER = (
    (re.compile(r"\b(?P<v>prefer|prefers|favou?r|favou?rs|take|choose|pick|want|value|values|rate|reward|rewards)"
                r"(?P<a>\s+[^.;!?]+?)\s+over\s+(?=[a-z])"), _over_contrast),
)
_IDIOMS = _DOUBLE_NEGATIONS + _PREFERRED_OVER + _QUANTITIES + _PHRASES + _CONTRASTS
_CLAUSE = re.compile(r"[.;:!?]|\bbut\b|\bhowever\b|\binstead\b|\brather\b")
_TOKEN = re.compile(r"[a-z][a-z']*")  # hyphens split words: "one-sentence" reads as "one sentence"
_SCOPE = 5  # a negator reaches this many words ahead, within its clause
_BACK_SCOPE = 6  # a disliking predicate reaches this many words back, within its clause and comma
# Predicates that dislike what comes before them: "wordy answers drive me crazy", "padding is a
# waste of my time", "brief answers frustrate me", "one-sentence replies are useless".
_BACK = "xbackx"
_COMMA = "xcommax"
_PHRASE_BREAKS = {_COMMA, "and", "or", "nor", "but"}  # where a negator's own phrase ends
_BACK_NEGATORS = re.compile(
    r"\b(?:(?:is|are|was|were|seem|seems|feel|feels|it's|they're|that's|it is|they are) "
    r"(?:so |really |just |usually |often |always |already |simply |way |far )?"
    r"(?:useless|pointless|unhelpful|annoying|irritating|frustrating|tedious|tiresome|boring|exhausting|"
    r"overwhelming|painful|disappointing|unsatisfying|insufficient|the worst|a pain|a chore|not helpful|"
    r"not useful|of no use|no use|no good|overkill|too much|not enough|never enough|a turn[- ]?off|wasted on me)|"
    r"(?:a |such a )?waste of (?:my |our |the reader'?s? )?time|wastes? (?:my |our |the reader'?s? )?time|"
    r"drives? me (?:crazy|nuts|mad|up the wall)|(?:bores?|annoys?|irritates?|frustrates?|disappoints?|"
    r"exhausts?|overwhelms?) (?:me|us|readers?)|(?:puts?|turns?) me off|leaves? me (?:wanting more|unsatisfied|"
    r"cold|frustrated)|makes? me (?:give up|lose interest|tune out|stop reading|zone out)|(?:i )?lose interest|"
    r"(?:is|are) not for me|(?:do|does) nothing for me|lose me|"
    r"(?:is|are)(?: not|n't) (?:a virtue|a plus|good|helpful|useful|enough|what i (?:want|need)|my thing|for me))\b")

# the text's hyphens read as spaces (``_rewrite_idioms``), so the keywords' do too
_AXES = {axis: tuple(dict.fromkeys(w.replace("-", " ") for w in words)) for axis, words in _AXES.items()}
LEXICON_AXES = tuple(_AXES) + ("negation",)
_SHORT, _LONG = LEXICON_AXES.index("short"), LEXICON_AXES.index("long")

# A criterion that only says what the user does not want ("No walls of text", "I can't stand
# long-winded replies") is read as "Avoid: <the rest>", the form the model is trained to sign.
_LEADING_NEGATION = re.compile(
    r"^(?:please,?\s+)?(?:no|avoid|avoiding|don'?t|do not|never|stop|skip|spare me|without|"
    r"i (?:don'?t|do not) (?:want|like|need|care for)|i (?:hate|dislike|can'?t stand|cannot stand)|"
    r"i'?d rather not have|(?:i\s+)?(?:get|am|'m|feel)?\s*(?:annoyed|irritated|frustrated|bored) (?:by|with)|"
    r"(?:i'?m |i am )?(?:tired|sick) of|(?:i'?m |i am )?not a fan of)\s+(?P<rest>.+)$", re.I)
# Words that say "more than wanted" inside a dislike: "Avoid: overly long answers" dislikes long
# answers, so they are dropped from the disliked part rather than read as a second negation.
_QUANTITY_LIMIT = re.compile(r"(?:more|less|fewer|longer|shorter) than\b|over \d|under \d")  # "No more than 3"
_INTENSIFIERS = re.compile(r"\b(?:overly|too|excessively|excessive|unnecessarily|unnecessary|needlessly|"
                           r"needless|over-the-top)\s+", re.I)


def strip_intensifiers(disliked: str) -> str:
    out = _INTENSIFIERS.sub("", disliked).strip()
    return out or disliked


# "Skip the intros and keep it brief": a wish follows the dislike, so the whole is no dislike
_WISH = (r"(?:(?:just |instead |then )?(?:keep|be|make|give|stay|use|stick|go|get|write|answer|tell|focus|expand|"
         r"elaborate|explain|add|include|cover)\b|just\b|only\b)")
_THEN_A_WISH = re.compile(rf"(?:\band\b|\bbut\b|;|,)\s+{_WISH}")
_SPECIAL = ("particular", "special", "specific", "distinct")
_STYLE_NOUNS = ("register", "tone", "style", "voice", "framing", "flavour", "flavor", "persona", "slant", "spin",
                "genre")
_NO_SPECIAL_STYLE = re.compile(rf"(?:any )?(?:{'|'.join(_SPECIAL)}) (?:{'|'.join(_STYLE_NOUNS)})s?\b")


def no_style_phrases() -> list[str]:
    """The phrases ``no_particular_style`` reads ("particular register", "any special tone"): what the sign
    reader's training texts say after an opener (``usl.fast.sign_reader.sign_corpus``)."""
    return [f"{a}{s} {n}" for a in ("", "any ") for s in _SPECIAL for n in _STYLE_NOUNS]


def no_particular_style(rest: str) -> bool:
    """Whether a disliked part is "particular register", "any special tone" and the like: "No particular
    register" is not a dislike of some register but a wish for none, the ordinary default one."""
    return bool(_NO_SPECIAL_STYLE.match(rest.strip().lower()))


def leading_negation(text: str) -> str | None:
    """The disliked part of a criterion that opens with a negation, else None. Conservative:
    nothing is returned when the rest holds another negation or a double-negation idiom
    ("Don't hold back", "Don't leave out any details", "No need to be brief"), which the
    keyword scope reads instead."""
    text = text.strip().replace("\u2019", "'")
    m = _LEADING_NEGATION.match(text)
    if not m or any(p.search(text.lower()) for p, _ in _DOUBLE_NEGATIONS):
        return None
    rest = strip_intensifiers(m.group("rest").strip().rstrip(".!"))
    if re.search(r"[.;!?]\s*\w", rest):  # "Don't leave me with a teaser. Give me the breakdown.": one sentence only
        return None
    f = lexicon_features(rest)
    if f[_LONG] > 0 and f[_SHORT] > 0:  # "I hate scrolling through walls of text to find the one line I need"
        return None
    toks = _TOKEN.findall(_rewrite_idioms(rest.lower()))
    if not toks or toks[0] in ("need", "problem", "worries", "matter") or _QUANTITY_LIMIT.match(rest.lower()) or \
            any(_is_negator(t) for t in toks) or _THEN_A_WISH.search(rest.lower()):
        return None
    return rest


_HYPHEN = re.compile(r"(?<=[a-z])-(?=[a-z])")


def _rewrite_idioms(low: str) -> str:
    low = _HYPHEN.sub(" ", low)  # "two-sentence", "long-winded": words as if apart
    for pattern, repl in _IDIOMS:
        low = pattern.sub(repl, low)
    return low


def lexicon_features(text: str) -> list[float]:
    """Per axis, signed: hits outside a negation's scope minus hits inside it (each capped at 2,
    scaled to -1..1), so "overly long answers" lands where "Avoid: long answers" does.

    A hit is disliked when an odd number of negators precede it closely ("I never want an answer
    that isn't short" likes short; "too" and the like dislike whatever else is said), when a
    disliking predicate follows it, when it is the subject of a clause whose predicate is negative
    ("Long replies tire me out", "Short answers never tell me enough"), or when it sits in a "when"
    clause that a negative main clause judges ("Whenever an answer runs long, I stop reading"; "I
    hate when a simple question gets an essay back"). The polarity of those predicates comes from
    the VADER sentiment lexicon, not from a list of our own."""
    low = _rewrite_idioms(text.lower().replace("\u2019", "'"))
    low = _FRAGMENT_REJECTED.sub(_reject_fragment, low)
    low = _COMMA_WISH.sub(" ; ", low)
    low = _ADJECTIVE_LIST.sub(r"\g<a> \g<b>", low)
    low = _BACK_NEGATORS.sub(f" {_BACK} ", low).replace(",", f" {_COMMA} ")
    pos = dict.fromkeys(_AXES, 0)
    neg = dict.fromkeys(_AXES, 0)
    any_neg = False
    for clause in _CLAUSE.split(low):
        toks = _TOKEN.findall(clause)
        padded = " " + " ".join(toks) + " "
        hits: list[tuple[str, int, int]] = []  # (axis, first token, tokens in the keyword)
        for axis, words in _AXES.items():
            for w in words:
                start = 0
                while (j := padded.find(w, start)) >= 0:
                    start = j + len(w)
                    if j > 0 and padded[j - 1].isalpha():  # "long" inside "belong"
                        continue
                    k = max(0, min(padded[:j].count(" ") - 1, len(toks)))
                    hits.append((axis, k, max(1, len(w.split()))))
        judged, conditional = _judged_negatively(toks, {k for _, k, _ in hits} | {k + n - 1 for _, k, n in hits})
        whole = bool(toks) and toks[0] == _NOT_CLAUSE  # a rhetorical question
        any_neg |= any(_is_negator(t) or t == _BACK for t in toks) or bool(judged)
        for axis, faults in _FAULT_RES.items():
            pos[axis] += len(faults.findall(padded))
        for axis, k, _ in hits:
            if k in conditional:  # "I hate when answers aren't detailed": the negations inside the clause count too
                negated, forced = _forward_negation(toks, k, lo=conditional[k])
                disliked = forced or not negated
            else:
                negated, forced = _forward_negation(toks, k)
                disliked = negated or _back_negated(toks, k) or k in judged
            (neg if disliked != whole else pos)[axis] += 1
    out: list[float] = []
    for axis in _AXES:
        out.append((min(pos[axis], 2) - min(neg[axis], 2)) / 2.0)
    out.append(1.0 if any_neg else 0.0)
    return out


def _is_negator(t: str) -> bool:
    return t in _NEGATORS or t.endswith("n't")


def _negates(t: str) -> bool:
    """A negation of the verb ("not", "never", "don't"), not a disliking word ("avoid", "too")."""
    return t in ("not", "never") or t.endswith("n't")


def _forward_negation(toks: list[str], i: int, lo: int = 0) -> tuple[bool, bool]:
    """Whether word ``i`` is negated, and whether by an excess word. It is negated by the nearest
    negator within a few words before it (from word ``lo`` on), which may itself be negated the
    same way ("I never want an answer that isn't short" likes short): an odd chain dislikes. An
    excess word ("too", "overly") dislikes whatever else negates it ("I don't want answers that
    are too long")."""
    count, at = 0, i
    while True:
        window = toks[max(lo, at - _SCOPE):at]
        if count:  # a negator's own negator is in its phrase: "No emojis and no bullets" is two dislikes
            cut = max((e for e, t in enumerate(window) if t in _PHRASE_BREAKS), default=-1)
            window = window[cut + 1:]
        j = next((at - 1 - e for e, t in enumerate(reversed(window)) if _is_negator(t)), None)
        if j is None:
            return count % 2 == 1, False
        if toks[j] in _EXCESS:
            return True, True
        count, at = count + 1, j


def _back_negated(toks: list[str], i: int) -> bool:
    """A disliking predicate follows word ``i`` closely, with no comma between."""
    for t in toks[i + 1:i + 1 + _BACK_SCOPE]:
        if t == _COMMA:
            return False
        if t == _BACK:
            return True
    return False


# The words that may open a clause before its subject's keyword ("Overly long replies ...",
# "Answers that ramble ...") and the nouns that may follow it ("... replies tire me out").
_ANSWER_NOUNS = {"answer", "answers", "reply", "replies", "response", "responses", "explanation", "explanations",
                 "text", "texts", "output", "outputs", "message", "messages", "one", "ones", "paragraphs",
                 "paragraph", "writing", "prose", "content", "info", "information", "stuff", "explaining",
                 "bot", "bots", "chatbot", "chatbots", "assistant", "assistants", "model", "models", "ai"}
_SUBJECT_OPENERS = {"a", "an", "the", "those", "these", "such", "any", "some", "all", "very", "really", "so",
                    "super", "extremely", "most", "that", "which", "who", "of", "and", "or", "kind", "sort",
                    "anything", "i", "find", "think", "consider"}  # "I find lengthy explanations exhausting"
_PREDICATE_END = {"and", "so", "because", "since", "while", "if", "when", "whenever", "but", "though",
                  "although", "unless", _COMMA, _BACK}
_CONDITIONALS = {"when", "whenever", "if", "once"}
_RELATIVE = {"that", "which", "who"}
_FUNCTION_WORDS = {"the", "a", "an", "my", "your", "our", "all", "any", "of", "with", "through", "me", "us", "you",
                   "it", "them", "to", "for", "in", "on", "at", "out", "up", "down", "off"}
_ADVERBS = {"just", "really", "usually", "always", "often", "simply", "still", "ever", "so", "totally", "honestly"}
_PLAIN_NEGATIONS = {"no", "not", "never", "don't", "dont", "without", "need"}  # "No need for detail when ..."
# main clauses that judge what their "when" clause describes: "..., I stop reading", "..., it's too long"
_JUDGES = {"i", "i'm", "i've", "i'll", "i'd", "it", "it's", "that", "that's", "this", "they", "they're", "you",
           "my", "me"}
_COPULAS = {"is", "are", "was", "were", "isn't", "aren't", "wasn't", "weren't", "seem", "seems", "feel", "feels"}
_NOT_A_PREDICATE = {"the", "a", "an", "my", "your", "our", "their", "this", "these", "those",
                    "it", "them", "me", "us", "on", "about", "in", "at", "with", "for", "to", "of", "over",
                    "through", "into", "from", "by"}
_MAIN_CLAUSE = 8  # words: "..., I stop reading" judges the "when" clause; a long main clause is a question of its own
_NEGATIVE = -0.05  # VADER compound score at or below which a predicate judges its subject negatively


def _judged_negatively(toks: list[str], keyword_at: set[int]) -> tuple[set[int], dict[int, int]]:
    """Positions of keywords that the clause judges negatively: the subject of a negative
    predicate; and the content of a "when"/"if" clause judged by a negative main clause, each
    with the position where its clause starts."""
    out: set[int] = set()
    cond: dict[int, int] = {}
    if not keyword_at:
        return out, cond
    # 1. subject: the clause opens with the keyword's noun phrase, then a negative predicate
    first = min(keyword_at)
    if all(t in _SUBJECT_OPENERS or t in _ANSWER_NOUNS or j in keyword_at for j, t in enumerate(toks[:first])):
        j = first
        while j < len(toks) and (j in keyword_at or toks[j] in _ANSWER_NOUNS) and j - first < 5:
            j += 1
        pred = toks[j:]
        for e, t in enumerate(pred):
            if t in _PREDICATE_END:
                pred = pred[:e]
                break
        # a relative clause describes its noun ("Examples that aren't boring"); an object or a
        # preposition follows an imperative ("Skim over the tricky parts", "Elaborate on the
        # details"): neither is a predicate, though a copula may follow the object ("Skimming over
        # the tricky parts is not okay")
        if pred and pred[0] in _RELATIVE:
            pred = []
        elif pred and pred[0] in _NOT_A_PREDICATE:
            pred = pred[next((e for e, t in enumerate(pred) if t in _COPULAS), len(pred)):]
        if pred and _negative(pred):
            out |= {k for k in keyword_at if k < j}
    # 2. "when"/"if" clauses: "I hate when <X>" (an attitude right before it), "When <X>, I stop
    # reading" (a main clause that judges; "When writing code, avoid globals" instructs)
    for p, t in enumerate(toks):
        if t not in _CONDITIONALS:
            continue
        cut = max((e for e, w in enumerate(toks[:p]) if w in _PHRASE_BREAKS or w == "so"), default=-1)
        left = toks[cut + 1:p]
        end = next((e for e in range(p + 1, len(toks)) if toks[e] in _PHRASE_BREAKS), len(toks))
        if left and (_BACK in left or (not any(w in _PLAIN_NEGATIONS for w in left)
                                       and polarity(" ".join(left)) <= _NEGATIVE)):
            cond |= {k: p + 1 for k in keyword_at if p < k < end}
        elif _COMMA in toks[p + 1:]:
            c = toks.index(_COMMA, p + 1)
            main = [w for w in toks[c + 1:] if w not in (_COMMA, _BACK)]
            if 0 < len(main) <= _MAIN_CLAUSE and main[0] in _JUDGES and (
                    polarity(" ".join(main)) <= _NEGATIVE or any(w in _EXCESS for w in main)):  # "..., it's too long"
                cond |= {k: p + 1 for k in keyword_at if p < k < c}
        break  # the first "when"/"if" of a clause only
    return out, cond


def _negative(words: list[str]) -> bool:
    """A predicate says something bad of its subject. Its head decides (a copula with the word or two
    after it, else the verb), so that objects do not ("Detailed answers prevent confusion"): a head
    that opens with a negation and says nothing good ("never tell me enough", not "aren't boring"),
    or a negative head whose object is not negative too ("tire me out", not "avoid confusion")."""
    words = [w for w in words if w not in _ADVERBS]
    if not words:
        return False
    if words[0] in _COPULAS or _negates(words[0]):
        head, rest = words[:3], words[3:]
    else:
        head, rest = words[:1], words[1:]
    score = polarity(" ".join(w for w in head if w != _BACK))
    if any(_negates(w) for w in head[:2]):  # "never tell me", "aren't boring"
        return score <= 0
    obj = next((w for w in rest if w not in _FUNCTION_WORDS), "")
    return score <= _NEGATIVE and not (obj and polarity(obj) <= _NEGATIVE)


_NOT_CLAUSE = "xnotx"  # rewritten rhetorical questions: everything in the clause is turned down
# ", just the answer", ", expand": a wish after a comma opens a clause of its own
_COMMA_WISH = re.compile(rf",\s+(?={_WISH})")

# "Wordy answers? No thanks.": a short fragment turned down by what follows it
_FRAGMENT_REJECTED = re.compile(r"(?:^|(?<=[.!;]))\s*(?P<a>[a-z][a-z' -]{0,50})\?\s*(?P<b>[^.!?;]{1,40})(?=[.!?;]|$)")


_QUESTION_VERBS = {"is", "are", "does", "do", "did", "can", "could", "will", "would", "should", "has", "have", "was",
                   "were", "may", "might", "must"}
_REJECTIONS = {"no", "not", "never", "nope", "nah", "absolutely", "definitely", "thanks", "thank", "you", "for", "me",
               "way", "really", "please", "pass", "hard", "needed", "necessary", "wanted", "ugh"}


def _reject_fragment(m: re.Match) -> str:
    """A verbless fragment ("Wordy answers?", not the rubric's "Is the answer detailed?") turned
    down by what follows: a negative phrase ("No thanks.") or bare refusal words ("Absolutely not.")."""
    a, b = m.group("a").split(), m.group("b").lower().split()
    if len(a) > 6 or a[0] in _QUESTION_VERBS:
        return m.group(0)
    refused = bool(b) and all(w.strip(",'") in _REJECTIONS for w in b) and \
        any(_negates(w) or w in ("no", "nope", "nah") for w in b)
    if refused or polarity(m.group("b")) <= -0.25:
        return f" no {m.group('a')} . {m.group('b')}"
    return m.group(0)


# "Short, clipped replies annoy me": a list of adjectives opening the text, before their noun, is one
# noun phrase
_ADJECTIVE_LIST = re.compile(r"^\s*(?P<a>[a-z]+), (?P<b>[a-z]+ (?:" + "|".join(sorted(
    n for n in ("answers", "answer", "replies", "reply", "responses", "response", "explanations", "text"))) + r"))\b")


def lexicon_matrix(texts) -> np.ndarray:
    """(n, len(LEXICON_AXES)) float32."""
    if not len(texts):
        return np.zeros((0, len(LEXICON_AXES)), np.float32)
    return np.asarray([_lexicon_row(t) for t in texts], dtype=np.float32)


@functools.lru_cache(maxsize=8192)
def _lexicon_row(text: str) -> tuple[float, ...]:
    """``lexicon_features`` kept by text: a board reads each criterion's several times (the criteria tower, the
    length and domain readers, the breakdown's boards), ~1 ms a time."""
    return tuple(lexicon_features(text))


AVOID_PREFIX = "avoid:"


def split_sign(criterion: str) -> tuple[str, float]:
    """ "Avoid: jargon" -> ("jargon", -1.0); a criterion that only negates ("No walls of text",
    "I can't stand long-winded replies") -> (the rest, -1.0); anything else is a like, sign +1.
    A dislike of faults only ("Avoid: unethical suggestions", "Don't encourage harmful behaviour")
    is a wish for the virtue, and is read whole as a like: the model scores how well an answer fits
    a criterion, and cannot score how harmful or wrong it is, so a flipped sign would only turn
    "avoid harm" into "prefer the worse answer". Likewise "No particular register" or "Avoid: any special
    tone", a wish for the ordinary register rather than against one (``no_particular_style``)."""
    text = criterion.strip()
    if text.lower().startswith(AVOID_PREFIX):
        rest = strip_intensifiers(text[len(AVOID_PREFIX):].strip())
    else:
        rest = leading_negation(text)
    if not rest or dislikes_only_faults(rest) or no_particular_style(rest):
        return text, 1.0
    return rest, -1.0
