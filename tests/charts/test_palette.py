"""The palette and the chart theme, held to the projector rules: strategies, phases and the
reference line never share a colour, neighbours stay apart for colour-blind viewers, and
chart text is large and dark enough."""

import itertools
import pathlib
import tomllib

import altair as alt
import pytest

from core.charts import colour_vision, style, theme
from core.charts.colour_vision import contrast, difference

from project import ROOT

# Groups a page shows together by default: the tutorial's five levels (Run, Story), the
# Scaling page's three, the faster ones, the peers.
SHOWN_TOGETHER = (
    ("eager", "jit_per_function", "scan", "scan_namedtuple", "scan_pytree_class"),
    ("scan", "jit_step", "jit_per_function"),
    ("scan", "fori_loop", "while_loop", "scan_analytic"),
    ("pyplnmodels", "torch_eager", "torch_compile"),
)


def test_the_colour_arithmetic_matches_known_values():
    assert contrast("#000000", "#FFFFFF") == pytest.approx(21.0)
    assert contrast("#808495", "#FFFFFF") == pytest.approx(3.8, abs=0.1)  # Streamlit's grey axis text
    assert difference("#0072B2", "#0072B2") == 0.0
    # Red and green, told apart at a glance with normal vision, merge for a deuteranope.
    normal = colour_vision.seen("#D55E00")["normal"] - colour_vision.seen("#009E73")["normal"]
    assert (normal ** 2).sum() ** 0.5 > 60 and difference("#CC3311", "#558800") < 15
    with pytest.raises(ValueError):
        colour_vision.linear_rgb("red")


def test_no_two_meanings_share_a_colour():
    strategies = set(style.STRATEGY_COLORS.values())
    phases, others = set(style.PHASE_COLORS), {style.UNKNOWN_COLOR, style.REFERENCE_COLOR}
    assert len(strategies) == len(style.STRATEGY_COLORS) and len(phases) == len(style.PHASE_COLORS)
    assert not (strategies & phases) and not (others & (strategies | phases)) and len(others) == 2
    assert set(style.STRATEGY_COLORS) == set(style.STRATEGY_ORDER)


def test_strategies_stay_apart_for_colour_blind_viewers():
    colours = style.STRATEGY_COLORS
    every_pair = min(difference(colours[a], colours[b]) for a, b in itertools.combinations(colours, 2))
    neighbours = min(difference(colours[a], colours[b])
                     for a, b in zip(style.STRATEGY_ORDER, style.STRATEGY_ORDER[1:]))
    together = min(difference(colours[a], colours[b])
                   for group in SHOWN_TOGETHER for a, b in itertools.combinations(group, 2))
    assert every_pair >= 14 and neighbours >= 36 and together >= 36
    # The complaints: jit_step / jit_per_function, and scan_pytree_class / eager.
    assert difference(colours["jit_step"], colours["jit_per_function"]) >= 36
    assert difference(colours["scan_pytree_class"], colours["eager"]) >= 36


def test_phases_read_in_time_order_and_apart_from_every_strategy():
    lightness = [colour_vision.luminance(c) for c in style.PHASE_COLORS]
    assert lightness == sorted(lightness, reverse=True)
    assert min(difference(a, b) for a, b in itertools.combinations(style.PHASE_COLORS, 2)) >= 15
    assert min(difference(p, s) for p in style.PHASE_COLORS for s in style.STRATEGY_COLORS.values()) >= 7
    # Greys, as no strategy is: a phase can never be read as naming one.
    assert max(colour_vision.lch(c)[1] for c in style.PHASE_COLORS) < colour_vision.CHROMATIC
    assert min(colour_vision.lch(c)[1] for c in style.STRATEGY_COLORS.values()) >= 25


@pytest.mark.parametrize("scheme", [theme.LIGHT, theme.DARK], ids=["light", "dark"])
def test_every_phase_stands_out_from_the_background_of_both_themes(scheme):
    # WCAG 1.4.11: a graphical object needs 3:1 against what surrounds it.
    for colour in style.PHASE_COLORS:
        assert contrast(colour, scheme["background"]) >= 3.0, colour


def test_the_hue_family_rule_tells_shades_of_one_hue_from_two_colours():
    assert colour_vision.same_hue_family("#E65E19", "#BF6A40")  # an orange and a burnt orange: one series
    assert not colour_vision.same_hue_family("#E65E19", "#734026")  # orange and a dark brown: two
    assert not colour_vision.same_hue_family("#0077BB", "#E65E19")  # blue and orange
    assert not colour_vision.same_hue_family("#707070", "#737373")  # greys have no hue
    assert colour_vision.same_hue_family("#CC3366", "#CC3388")  # hues 7 and 350 degrees: across 0 too
    assert colour_vision.lch("#FFFFFF")[0] == pytest.approx(100, abs=0.1)


def test_no_two_series_colours_are_in_one_hue_family():
    named = {**style.STRATEGY_COLORS, "unknown": style.UNKNOWN_COLOR, "reference": style.REFERENCE_COLOR}
    together = [(a, b) for a, b in itertools.combinations(named, 2)
                if colour_vision.same_hue_family(named[a], named[b])]
    assert not together, together


def test_strategy_and_reference_marks_stand_out_on_both_themes():
    assert min(contrast(style.REFERENCE_COLOR, scheme["background"]) for scheme in (theme.LIGHT, theme.DARK)) >= 3.0
    for colour in style.STRATEGY_COLORS.values():
        assert contrast(colour, theme.LIGHT["background"]) >= 3.0, colour
        assert contrast(colour, theme.DARK["background"]) >= 2.0, colour


@pytest.mark.parametrize("dark", [False, True])
def test_chart_text_is_projector_sized_and_passes_aaa(dark):
    config = theme.config(dark)
    background = (theme.DARK if dark else theme.LIGHT)["background"]
    sizes = [config["axis"]["labelFontSize"], config["axis"]["titleFontSize"], config["legend"]["labelFontSize"],
             config["legend"]["titleFontSize"], config["title"]["fontSize"], config["text"]["fontSize"]]
    assert min(sizes) >= 16
    colours = [config[part][key] for part in ("axis", "legend") for key in ("labelColor", "titleColor")]
    colours += [config["title"]["color"], config["text"]["color"]]
    assert min(contrast(c, background) for c in colours) >= 7.0


def test_the_registered_theme_reaches_every_chart_and_page_settings_survive():
    theme.register()
    chart = alt.Chart().mark_point()
    assert alt.theme.active == theme.NAME
    assert chart.to_dict()["config"]["axis"]["labelFontSize"] == theme.LABEL_PX
    config = theme.configured(chart, axis={"labelLimit": 0}, legend={"orient": "bottom"}).to_dict()["config"]
    assert config["axis"]["labelLimit"] == 0 and config["legend"]["orient"] == "bottom"
    assert config["axis"]["labelColor"] == theme.LIGHT["text"] and config["legend"]["labelFontSize"] == theme.LABEL_PX
    assert theme.configured(chart) is chart


def test_both_streamlit_themes_keep_text_at_aaa_and_match_the_chart_theme():
    settings = tomllib.loads((pathlib.Path(ROOT) / ".streamlit" / "config.toml").read_text())["theme"]
    for name, scheme in (("light", theme.LIGHT), ("dark", theme.DARK)):
        assert settings[name]["backgroundColor"].upper() == scheme["background"].upper()
        assert contrast(settings[name]["textColor"], settings[name]["backgroundColor"]) >= 7.0
        assert settings[name]["textColor"].upper() == scheme["text"].upper()
