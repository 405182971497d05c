"""The design-review report: one self-contained HTML page (plotly.js embedded) with timelines, gain curves,
calibration, the threshold map and hazards. Every module imports plotly lazily, inside its functions, so
``moesim`` commands that never draw do not pay plotly's import time."""
