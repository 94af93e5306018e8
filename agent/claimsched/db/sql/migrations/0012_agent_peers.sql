-- 0012: which agents have the same jobs (peers), so that each occurrence has one first claimer.
-- cs_housekeeping sets handlers_digest whenever an agent sends its job list, and returns the
-- live agents whose digest is the caller's: the replicas of one deployment, which share the
-- work of their jobs by a hash of each occurrence (agent/claimsched/turns.py). NULL: an agent
-- of a version before this one, which is nobody's peer.
ALTER TABLE agents ADD COLUMN handlers_digest text;  -- md5 of the job list, one name per line
