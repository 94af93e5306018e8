-- 0016: an agent's presence row belongs to the database login that created it. Agent ids are
-- not secret (logs, `claimsched agents`, the web view): cs_housekeeping and cs_agent_stopped
-- write a row only for its own login (session_user), or for the schema's owner and its members;
-- a row from before this column (NULL) is taken by the first login that writes it.

ALTER TABLE agents ADD COLUMN login_role text;  -- session_user of the agent that created it
