"""The tools over the bench's measurements and the steps' code: profiling (``profile``), the README and
docs tables (``report``), the walkthrough pages (``walkthrough``), the pictures of which thread touches what
(``mapping``), the compiled PTX and SASS (``machine_code``), the asv history (``asv_history``) and a model's
memory and times predicted from a GPU's results (``llm_budget``). Only the CLI imports them.
"""
