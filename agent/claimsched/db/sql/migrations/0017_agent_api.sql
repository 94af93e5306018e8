-- 0017: the SQL API agents call has versions (sql/functions.sql), so that a rolling upgrade runs
-- the agents of two releases against one schema. API 1 is the functions of claimsched 0.1.0
-- (cs_claim, cs_complete, ...: no suffix); API N >= 2 the cs_*_vN functions of the release that
-- introduced it. A release's migration adds the version its agents call; a later release's
-- migration drops an older version (its functions and its row here) once no live agent calls
-- it (agents.api), and `claimsched migrate` refuses to drop one that a live agent still calls.

-- The versions this schema serves. What a schema serves is no secret: every role that may
-- reach the schema (USAGE) may read it, whatever it was granted before this table existed (an
-- agent checks here that a schema newer than its release still serves its API).
CREATE TABLE agent_apis (
    api integer PRIMARY KEY,  -- the version: 1, or the N of the cs_*_vN functions
    release text NOT NULL     -- the claimsched release whose agents first called it
);
INSERT INTO agent_apis (api, release) VALUES (1, '0.1.0'), (2, '0.2.0');
GRANT SELECT ON agent_apis TO PUBLIC;

-- The version each agent calls: written by its housekeeping, every period. 1 for a row
-- written by an agent of claimsched 0.1.0, which knows nothing of this column.
ALTER TABLE agents ADD COLUMN api integer NOT NULL DEFAULT 1;
