"""The «Поиск» tab: a search's trials, its history plot, its fields' importance (app.search)."""
