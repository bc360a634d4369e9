"""The configuration: the model of spectrn.yaml, its sources with their origins, presets, catalogs and rules."""
