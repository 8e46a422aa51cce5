"""The run queue's views: the «Очередь» tab, its timeline, the series dialogs."""
