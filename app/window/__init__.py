"""The window's core without Qt: `Lab` (`lab`: what the window shows and does, decided
here and tested without a window), the layout it remembers (`layout`) and its meaning
colours (`colors`)."""
