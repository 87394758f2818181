package natsqueue

import "strings"

// splitPrefixes reads a comma-separated list of subject prefixes.
func splitPrefixes(list string) []string {
	var out []string
	for _, p := range strings.Split(list, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// ReplyAllowed reports whether a worker may publish a job's reply to
// subject. A job's reply_to is whatever its producer wrote, and the worker
// publishes with its own NATS rights: without a bound, any producer could
// make workers publish on subjects it may not use itself (another
// producer's inbox, say). With no prefixes configured any subject is
// allowed, as on an open server. A prefix matches whole tokens only:
// "_INBOX_api" allows "_INBOX_api.x", never "_INBOX_apix.y".
func (c *Conn) ReplyAllowed(subject string) bool {
	if len(c.replyPrefixes) == 0 {
		return true
	}
	for _, p := range c.replyPrefixes {
		p = strings.TrimSuffix(p, ".")
		if strings.HasPrefix(subject, p+".") && !strings.ContainsAny(subject, "*> \t") {
			return true
		}
	}
	return false
}
