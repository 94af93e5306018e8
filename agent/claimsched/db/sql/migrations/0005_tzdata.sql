-- Agents report the IANA time zone database they compute fire times with: two versions can map
-- one local time to two UTC instants (and both would run), so `claimsched agents` warns when
-- live agents disagree.
ALTER TABLE agents ADD COLUMN tzdata text;
