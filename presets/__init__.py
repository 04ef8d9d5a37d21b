"""Style presets: TOML data files in this folder, validated by `presets.schema`."""
