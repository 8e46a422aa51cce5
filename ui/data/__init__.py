"""The data's views: the «Данные» dialog and the form's «Подготовить данные» row."""
