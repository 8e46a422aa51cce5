"""The «Новый прогон» form's view: its fields, its scroll column and footer, the help page, its queue buttons."""
