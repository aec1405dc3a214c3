-- The rollup fold never compiles its plans. On a server with JIT (PostgreSQL's default where it was
-- built with LLVM), the fold's statements cost more than jit_above_cost by their estimates, and
-- compiling them took longer than running them: 4 folds of a 5,000-task drain spent 196 ms of their
-- 512 ms in JIT, on the cores the worker and its claims need. The settlement already turns JIT off
-- for its own statements.
ALTER FUNCTION quire_rollup_fold() SET jit = off;
