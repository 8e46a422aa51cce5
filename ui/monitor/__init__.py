"""The «Видеокарта» tab: the GPU monitor's panel, its card and its sampling thread."""
