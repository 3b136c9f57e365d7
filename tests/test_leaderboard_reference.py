"""Published leaderboards: model names come from the samples URL's folder."""

import pytest

from usl import paths
from usl.leaderboard.reference import load_reference, parse_leaderboard_csv

CSV = """name,length_controlled_winrate,win_rate,avg_length,link,samples,filter
GPT-4 Preview (11/06),50.0,50.0,2049,,https://github.com/tatsu-lab/alpaca_eval/blob/main/results/gpt4_1106_preview/model_outputs.json,minimal
Some Model,,12.5,100,,https://github.com/tatsu-lab/alpaca_eval/blob/main/results/some-model/model_outputs.json,community
No Samples,30,31,100,,,community
"""


def test_parse_uses_folder_names_and_skips_blanks():
    assert parse_leaderboard_csv(CSV, "win_rate") == {"gpt4_1106_preview": 50.0, "some-model": 12.5}
    assert parse_leaderboard_csv(CSV, "length_controlled_winrate") == {"gpt4_1106_preview": 50.0}
    with pytest.raises(ValueError, match="lacks the 'samples' or 'nope' column"):
        parse_leaderboard_csv(CSV, "nope")


def test_unknown_reference():
    with pytest.raises(ValueError, match="unknown reference leaderboard 'x'; known: alpaca_eval_2"):
        load_reference("x")


@pytest.mark.skipif(paths.shared_data() is None, reason="needs ../shared/data")
def test_local_alpaca_eval_2_covers_the_board_models():
    import json

    ref = load_reference("alpaca_eval_2")
    split = json.loads((paths.shared_data() / "alpaca_eval" / "split.json").read_text())
    missing = [m for m in split["board_models"] if m not in ref]
    assert missing == ["text_davinci_003"]       # AlpacaEval 2 never listed it
    assert ref["gpt4_1106_preview"] == pytest.approx(50.0)
