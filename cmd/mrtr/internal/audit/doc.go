// Package audit is mrtr audit verify: it checks an --audit trail's MACs
// and links (the library package audit, imported as mrtraudit here, does
// the checking).
package audit
