"""Compose length wishes said through a negation or indirectly, as training data for the criteria reader.

    python scripts/compose_length_wordings.py --out configs/length_wordings/composed_u.json

The criteria reader learns a wish's length direction from labelled wordings. Hand-written files hold a few
hundred wishes said through a negation ("don't ..."), a double negation ("I'm not in a hurry") or a
situation ("I have a train to catch"), too few to teach that a negation turns the direction. This script
writes many of them by composing parts of English: a frame ("Please", "I'd like it if"), a negation or not,
and a core that names length, time, effort or reading (each core labelled with the direction it asks for
as said, the negation turning it). Wishes that name no length ("Not too formal", "No jokes") are composed
the same way, so that a negation alone does not read as a length wish.

Nothing here reads a criterion at judging time: the output is a wordings file like the hand-written ones
(``concise`` / ``detailed`` / ``neutral`` lists), trained on by ``usl train-criteria``, which drops any
wording that is also in a test file or the blind set. A seeded sample of the compositions is kept.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
from pathlib import Path

# -- cores, by direction: +1 shorter answers, -1 longer ones, 0 neither (see compose for which form) --
# adjectives an answer can be: "Don't be X", "Not X", "No need to be X"
ADJ = {
    +1: ["long", "lengthy", "wordy", "verbose", "long-winded", "rambling", "drawn out", "padded", "bloated",
         "exhaustive", "elaborate", "windy", "overlong", "sprawling", "repetitive", "dense with detail",
         "essay-length", "overly thorough"],
    -1: ["short", "brief", "terse", "curt", "clipped", "skimpy", "thin", "bare", "sparse", "superficial",
         "shallow", "one-line", "abrupt", "minimal", "cursory", "sketchy"],
    0: ["formal", "casual", "stiff", "silly", "jokey", "technical", "preachy", "salesy", "cold", "rude",
        "vague", "robotic", "cheesy", "flowery", "condescending", "dry", "biased", "pushy", "sarcastic",
        "academic", "corporate", "emotional", "sugary", "smug"],
}
# things an answer can do: "Don't X", "Please X", "Avoid Xing" is not composed (gerunds vary)
DO = {
    +1: ["ramble", "go on and on", "pad it out", "over-explain", "elaborate endlessly", "write an essay",
         "drag it out", "belabor the point", "write a novel", "list every detail", "repeat yourself",
         "give me a lecture", "add filler", "go off on tangents", "explain every step", "write paragraphs",
         "beat around the bush", "include background I didn't ask for", "add long introductions",
         "spell out the obvious", "bury the answer in text", "write more than a few lines"],
    -1: ["skimp", "cut corners", "hold back on details", "leave steps out", "cut it short", "abbreviate",
         "summarize it away", "gloss over things", "skip the explanation", "rush through it",
         "stop at one line", "leave me guessing", "give me just the headline", "oversimplify",
         "skip the background", "assume I know the context", "be stingy with details", "truncate the answer"],
    0: ["use jargon", "make jokes", "use emojis", "use bullet points", "be rude", "lecture me on ethics",
        "sound like an ad", "use slang", "write in the passive voice", "use exclamation marks",
        "moralize", "pretend to be human", "use British spelling", "hedge everything", "flatter me",
        "use headings", "switch languages", "use markdown tables", "make things up", "cite fake sources"],
}
# things the user has, is, or feels: "I X", "I don't X" (given as (positive, negative) forms)
STATE = {
    +1: [("I'm in a hurry", "I'm not in a hurry"), ("I'm short on time", "I'm not short on time"),
         ("I'm busy", "I'm not busy"), ("I'm pressed for time", "I'm not pressed for time"),
         ("I'm in a rush", "I'm not in a rush"), ("I'm on a deadline", "I'm not on a deadline"),
         ("I'm reading this on my phone", "I'm not reading this on my phone"),
         ("I skim everything", "I don't skim"), ("I have a short attention span", "I don't have a short attention span"),
         ("I hate reading long texts", "I don't hate reading long texts"),
         ("I'm about to walk into a meeting", "I'm not about to walk into a meeting"),
         ("I only have a minute", "I have more than a minute"),
         ("I need this fast", "I don't need this fast"), ("I get bored quickly", "I don't get bored quickly"),
         ("I just want the answer", "I don't just want the answer"),
         ("I already know the background", "I don't know the background"),
         ("I'm an expert on this", "I'm not an expert on this"),
         ("time is tight", "time isn't tight"), ("I'm running late", "I'm not running late")],
    -1: [("I have all the time in the world", "I don't have all the time in the world"),
         ("I have plenty of time", "I don't have plenty of time"), ("I have time to read", "I don't have time to read"),
         ("I enjoy long reads", "I don't enjoy long reads"), ("I like thorough answers", "I don't like thorough answers"),
         ("I'm new to this", "I'm not new to this"), ("I'm a complete beginner", "I'm not a beginner"),
         ("I love details", "I don't love details"), ("I want to understand it fully", "I don't need to understand it fully"),
         ("I'm studying this in depth", "I'm not studying this in depth"), ("I'm retired", "I'm not retired"),
         ("I read every word", "I don't read every word"), ("I have the whole afternoon", "I don't have the whole afternoon"),
         ("I'm happy to read a lot", "I'm not happy to read a lot"), ("I'm curious about the why", "I'm not curious about the why"),
         ("long answers are fine", "long answers aren't fine"), ("I have a long commute to read this on", "I don't have a long commute")],
    0: [("I'm a teacher", "I'm not a teacher"), ("I'm writing for kids", "I'm not writing for kids"),
        ("I'm vegetarian", "I'm not vegetarian"), ("I live in Canada", "I don't live in Canada"),
        ("I use Python", "I don't use Python"), ("I like humor", "I don't like humor"),
        ("I'm easily offended", "I'm not easily offended"), ("I like a friendly tone", "I don't like a friendly tone"),
        ("I prefer metric units", "I don't use metric units"), ("I care about sources", "I don't care about sources"),
        ("I'm a lawyer", "I'm not a lawyer"), ("I like plain words", "I don't like fancy words"),
        ("I'm colour-blind", "I'm not colour-blind"), ("I value honesty", "I don't want flattery")],
}
# nouns an answer can hold: "No X", "Spare me X", "Give me X"
NOUN = {
    +1: ["walls of text", "essays", "long introductions", "filler", "padding", "preambles", "long lists",
         "lengthy caveats", "the whole history", "every possible detail", "tangents", "recaps",
         "long disclaimers", "a ten-paragraph answer", "extra context", "fluff", "page after page"],
    -1: ["one-liners", "bare answers", "a single sentence", "cut-down answers", "shortcuts in the explanation",
         "half-explanations", "answers with the steps left out", "a summary only", "a yes or no",
         "telegraphic answers", "the short version", "clipped replies"],
    0: ["jokes", "jargon", "emojis", "small talk about the weather", "marketing speak", "bullet points",
        "moralizing", "slang", "made-up facts", "code", "math notation", "politics", "flattery",
        "exclamation marks", "clichés", "profanity", "pop culture references"],
}
POS_FRAME = ["{x}.", "Please {x}.", "{x}, please.", "I'd like you to {x}.", "I want you to {x}.",
             "It's fine to {x}.", "Feel free to {x}."]
NEG_DO = ["Don't {x}.", "Do not {x}.", "Please don't {x}.", "Never {x}.", "No need to {x}.",
          "There's no need to {x}.", "I'd rather you didn't {x}.", "Try not to {x}.", "You don't have to {x}."]
NEG_ADJ = ["Not {x}.", "Not too {x}.", "Don't be {x}.", "Don't be too {x}.", "Nothing {x}.",
           "Not overly {x}.", "Please don't be {x}.", "No need to be {x}.", "Avoid being {x}.",
           "I don't want it {x}.", "It shouldn't be {x}.", "It needn't be {x}.", "Never {x}.",
           "Don't make it {x}.", "Not so {x}, please."]
POS_ADJ = ["Be {x}.", "Make it {x}.", "{x}, please.", "I want it {x}.", "It can be {x}.",
           "{x} is fine.", "I like it {x}.", "Keep it {x}."]
STATE_FRAME = ["{x}.", "{x}, so keep that in mind.", "Note: {x}.", "Just so you know, {x}.", "FYI {x}.",
               "{x}; write accordingly."]
NEG_NOUN = ["No {x}.", "No {x}, please.", "Avoid: {x}", "Spare me {x}.", "Skip {x}.", "Without {x}.", "I don't want {x}.",
            "Avoid {x}.", "Leave out {x}.", "Hold the {x}.", "None of {x}."]
POS_NOUN = ["Give me {x}.", "{x} is what I want.", "I want {x}.", "I like {x}.", "{x} welcome.",
            "I'm fine with {x}."]
# a wish that length does not matter, or a condition that keeps both ways open
NEUTRAL_EXTRA = ["Length doesn't matter to me.", "I don't care how long it is.", "Any length is fine.",
                 "Long or short, I don't mind.", "Whatever length it takes, as long as it's right.",
                 "I'm not picky about length.", "Length is up to you.", "Short or long is fine by me."]


def compose(seed: int = 0, per_cell: int = 150) -> dict[str, list[str]]:
    """``{"concise": [...], "detailed": [...], "neutral": [...]}``: per (part, frame kind, direction as
    said) at most ``per_cell`` compositions, sampled with ``seed``."""
    rng = random.Random(seed)
    out: dict[int, set[str]] = {+1: set(), -1: set(), 0: set()}

    def add(frames: list[str], cores: list[str], direction: int) -> None:
        got = [f.format(x=c) for f, c in itertools.product(frames, cores)]
        rng.shuffle(got)
        for text in got[:per_cell]:
            out[direction].add(text[0].upper() + text[1:])

    # ADJ, DO and NOUN are keyed by what their negation asks ("Not too long": shorter); STATE by what it
    # asks as said ("I'm in a hurry": shorter), its negative form the other way
    for d in (+1, -1, 0):
        add(NEG_DO, DO[d], d)
        add(POS_FRAME, DO[d], -d)
        add(NEG_ADJ, ADJ[d], d)
        add(POS_ADJ, ADJ[d], -d)
        add(NEG_NOUN, NOUN[d], d)
        add(POS_NOUN, NOUN[d], -d)
        add(STATE_FRAME, [p for p, _ in STATE[d]], d)
        add(STATE_FRAME, [n for _, n in STATE[d]], -d)
    out[0].update(NEUTRAL_EXTRA)
    return {"concise": sorted(out[+1]), "detailed": sorted(out[-1]), "neutral": sorted(out[0])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--per-cell", type=int, default=150)
    args = ap.parse_args()
    got = compose(args.seed, args.per_cell)
    Path(args.out).write_text(json.dumps(got, indent=1, ensure_ascii=False) + "\n")
    print({k: len(v) for k, v in got.items()})


if __name__ == "__main__":
    main()
