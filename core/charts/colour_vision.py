"""How far apart two colours look, with normal vision and with the common colour-vision
deficiencies, and how well text or a mark stands out from its background.

- Contrast ratio: WCAG 2.1's (relative luminance of sRGB), 7:1 for text at level AAA, 3:1
  for graphical objects (1.4.11).
- Deficiencies: protanopia and deuteranopia (about 1 man in 12 between them), simulated
  with the full-severity matrices of Machado, Oliveira and Fernandes (2009) on linear RGB.
- Difference: CIELAB delta E (CIE76) under D65; about 2.3 is just noticeable, above 10
  two colours read as different at a glance.
- Hue family: two colours read as "the same colour, a bit off" (an orange and a burnt
  orange) when their CIELCh hue angles are under `FAMILY_HUE_DEGREES` apart and their
  lightness L* under `FAMILY_LIGHTNESS` apart; a dark and a light shade of one hue (a
  brown and an orange, a navy and a sky blue) read as two colours. Greys (chroma under
  `CHROMATIC`) have no hue and belong to no family.
"""

from __future__ import annotations

import numpy as np

# Machado et al. (2009), severity 1.0, applied to linear RGB.
DEFICIENCIES = {
    "protanopia": np.array([[0.152286, 1.052583, -0.204868],
                            [0.114503, 0.786281, 0.099216],
                            [-0.003882, -0.048116, 1.051998]]),
    "deuteranopia": np.array([[0.367322, 0.860646, -0.227968],
                              [0.280085, 0.672501, 0.047413],
                              [-0.011820, 0.042940, 0.968881]]),
}
_RGB_TO_XYZ = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
_D65 = np.array([0.95047, 1.0, 1.08883])
FAMILY_HUE_DEGREES = 30.0
FAMILY_LIGHTNESS = 15.0
CHROMATIC = 15.0


def linear_rgb(colour: str) -> np.ndarray:
    """"#RRGGBB" -> linear RGB in [0, 1] (sRGB's transfer curve undone)."""
    text = colour.lstrip("#")
    if len(text) != 6:
        raise ValueError(f"expected a colour as #RRGGBB; got {colour!r}")
    encoded = np.array([int(text[i:i + 2], 16) / 255 for i in (0, 2, 4)])
    return np.where(encoded <= 0.04045, encoded / 12.92, ((encoded + 0.055) / 1.055) ** 2.4)


def luminance(colour: str) -> float:
    """WCAG relative luminance, 0 (black) to 1 (white)."""
    return float(np.dot([0.2126, 0.7152, 0.0722], linear_rgb(colour)))


def contrast(foreground: str, background: str) -> float:
    """WCAG contrast ratio, 1 (none) to 21 (black on white)."""
    high, low = sorted((luminance(foreground), luminance(background)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def _lab(rgb: np.ndarray) -> np.ndarray:
    ratio = (_RGB_TO_XYZ @ np.clip(rgb, 0.0, 1.0)) / _D65
    f = np.where(ratio > 0.008856, np.cbrt(ratio), 7.787 * ratio + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def seen(colour: str) -> dict[str, np.ndarray]:
    """The colour in CIELAB as seen with normal vision and with each deficiency."""
    rgb = linear_rgb(colour)
    return {"normal": _lab(rgb), **{name: _lab(matrix @ rgb) for name, matrix in DEFICIENCIES.items()}}


def difference(first: str, second: str) -> float:
    """The smallest delta E between two colours over normal vision and each deficiency."""
    a, b = seen(first), seen(second)
    return min(float(np.linalg.norm(a[view] - b[view])) for view in a)


def lch(colour: str) -> tuple[float, float, float]:
    """CIELCh of the colour with normal vision: lightness L* (0 to 100), chroma C* (0 for a
    grey) and hue angle h in degrees (0 to 360)."""
    lightness, a, b = seen(colour)["normal"]
    return float(lightness), float(np.hypot(a, b)), float(np.degrees(np.arctan2(b, a)) % 360)


def same_hue_family(first: str, second: str) -> bool:
    """True when the two colours are shades of one hue at about one lightness (see the
    module's docstring): side by side as two series, they read as one."""
    (l1, c1, h1), (l2, c2, h2) = lch(first), lch(second)
    if min(c1, c2) < CHROMATIC:
        return False
    apart = abs(h1 - h2) % 360
    return min(apart, 360 - apart) < FAMILY_HUE_DEGREES and abs(l1 - l2) < FAMILY_LIGHTNESS
