//! Unit tests of regions, windows, tokens and LAMs, grouped by state.
