"""The tools over the bench's measurements and the steps' code: profiling (``profile``), the README and
docs tables (``report``), the walkthrough pages (``walkthrough``), the pictures of which thread touches what
(``mapping``) and the compiled PTX and SASS (``machine_code``). Only the CLI imports them.
"""
