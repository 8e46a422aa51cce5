"""The lab's scaling law («Закон лабы»): L(N, D) = E + A/N^α + B/D^β fitted to the lab's own
runs of one data set (`fit`, `points`), the ladder it offers when not enough (`ladder`), the
report and the form's advice lines (`report`, `advice`), `ternit law` (`cli`)."""
