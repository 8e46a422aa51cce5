"""The lab's foundations, which every other part of app/ stands on and which stand on none of
them: where the lab keeps its files (`paths`) and how it writes them (`atomic`), its settings
file (`settings`), its state database (`state`), its log file (`logs`), the interface's
language and numbers (`i18n`, `numbers`, and `cli_args`: argparse in that language), and the
words the form, the sizing, the history and the Kaggle legs share: the run statuses
(`run_status`) and the «Экономный режим» choices (`memory_saving`)."""
