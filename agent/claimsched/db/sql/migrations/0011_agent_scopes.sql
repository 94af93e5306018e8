-- 0011: per-role job scopes for agents (`claimsched roles --agent-role NAME --jobs PATTERN`).
-- A role with rows here acts only for the jobs whose names match one of its patterns (LIKE:
-- '%' any run of characters, '_' any one character, '\' escapes); a caller is scoped by the
-- rows of its login role and of every role it is a member of (the union). A role with no row,
-- and a caller with none through its memberships, acts for every job (the default
-- claimsched_agent). The schema's owner (and a superuser) is never scoped: it may write the
-- tables directly. cs_claim, cs_reclaim and cs_declare_schedule read this table
-- (sql/functions.sql); only the schema's owner writes it (`claimsched roles`).

CREATE TABLE agent_scopes (
    role text NOT NULL,         -- a role's name (rows of a dropped role match no caller)
    job_pattern text NOT NULL,  -- a LIKE pattern on job_schedule.job_name
    PRIMARY KEY (role, job_pattern)
);
