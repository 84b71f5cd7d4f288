package mongosim

import (
	"context"
	"errors"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// codeDocumentValidationFailure is mongod's DocumentValidationFailure.
const codeDocumentValidationFailure = 121

// validator is a collection's document validator (create/collMod
// validator, validationLevel, validationAction).
type validator struct {
	spec   bson.D
	filter *query.Filter // nil: no validator, only level/action set
	level  string        // "strict", "moderate" or "off"
	action string        // "error" or "warn"
}

// validationError is a DocumentValidationFailure with the errInfo mongod
// attaches to it; it unwraps to its *cmderr.Error.
type validationError struct {
	err     *cmderr.Error
	errInfo bson.D
}

func (e *validationError) Error() string { return e.err.Error() }
func (e *validationError) Unwrap() error { return e.err }

// validatorArgs reads validator, validationLevel and validationAction from
// a create or collMod command into cur (nil: defaults). It reports whether
// any was given.
func validatorArgs(cmd string, d bson.D, cur *validator) (*validator, bool, error) {
	v := &validator{level: "strict", action: "error"}
	if cur != nil {
		*v = *cur
	}
	set := false
	for _, e := range d {
		switch e.Key {
		case "validator":
			spec, ok := e.Value.(bson.D)
			if !ok {
				return nil, false, typeErr(cmd+".validator", "object", e.Value)
			}
			if err := checkValidatorSpec(spec); err != nil {
				return nil, false, err
			}
			f, err := query.CompileFilter(spec)
			if err != nil {
				return nil, false, err
			}
			v.spec, v.filter, set = value.CloneDoc(spec), f, true
			if len(spec) == 0 {
				// An empty validator is none: on create mongod records
				// nothing for it, on collMod it removes the validator.
				v.spec, v.filter, set = nil, nil, cmd == "collMod"
			}
		case "validationLevel":
			s, _ := e.Value.(string)
			switch s {
			case "off", "strict", "moderate":
			default:
				return nil, false, cmderr.New(cmderr.BadValue, "Enumeration value '%s' for field '%s.validationLevel' is not a valid value.", shellStringOrRaw(e.Value), cmd)
			}
			v.level, set = s, true
		case "validationAction":
			s, _ := e.Value.(string)
			switch s {
			case "error", "warn":
			default:
				return nil, false, cmderr.New(cmderr.BadValue, "Enumeration value '%s' for field '%s.validationAction' is not a valid value.", shellStringOrRaw(e.Value), cmd)
			}
			v.action, set = s, true
		}
	}
	return v, set, nil
}

func shellStringOrRaw(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return shellString(v)
}

// checkValidatorSpec refuses what mongod refuses in a validator.
func checkValidatorSpec(spec bson.D) error {
	for _, e := range spec {
		switch e.Key {
		case "$text", "$near", "$nearSphere", "$geoNear", "$where":
			return cmderr.New(cmderr.QueryFeatureNotAllowed, "%s is not allowed in this context", e.Key)
		}
		if e.Key == "$and" || e.Key == "$or" || e.Key == "$nor" {
			for _, x := range value.AsArray(e.Value) {
				if d, ok := x.(bson.D); ok {
					if err := checkValidatorSpec(d); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// options renders the validator as listCollections shows it in options.
func (v *validator) options() bson.D {
	var out bson.D
	if v.spec != nil {
		out = append(out, bson.E{Key: "validator", Value: value.CloneDoc(v.spec)})
	}
	return append(out, bson.E{Key: "validationLevel", Value: v.level}, bson.E{Key: "validationAction", Value: v.action})
}

// active reports whether writes must be checked at all; a collection
// without a validator costs one nil check per write.
func (v *validator) active() bool { return v != nil && v.filter != nil && v.level != "off" }

// validate checks doc, about to be stored in c; old is the document it
// replaces (nil for an insert). It runs under c's write lock.
func (c *collection) validate(doc, old bson.D) error {
	v := c.validator
	if !v.active() || c.bypass || c.committing != nil {
		return nil
	}
	if ok, err := v.filter.MatchErr(doc); err == nil && ok {
		return nil
	}
	if old != nil && v.level == "moderate" {
		// moderate: updates to documents that already fail are not checked.
		if ok, err := v.filter.MatchErr(old); err != nil || !ok {
			return nil
		}
	}
	id, _ := value.Get(doc, "_id")
	info := bson.D{
		{Key: "failingDocumentId", Value: value.Clone(id)},
		{Key: "details", Value: query.FailureDetails(v.spec, doc)},
	}
	if v.action == "warn" {
		if c.logger != nil {
			c.logger.Warn("Document would fail validation", "namespace", c.ns(), "document", shellString(doc), "errInfo", shellString(info))
		}
		return nil
	}
	return &validationError{err: cmderr.New(codeDocumentValidationFailure, "Document failed validation"), errInfo: info}
}

// bypassKey marks a context whose writes skip document validation
// (bypassDocumentValidation: true).
type bypassKey struct{}

func withBypass(ctx context.Context) context.Context {
	return context.WithValue(ctx, bypassKey{}, true)
}

func bypassing(ctx context.Context) bool {
	b, _ := ctx.Value(bypassKey{}).(bool)
	return b
}

// bypassArg applies the command's bypassDocumentValidation to r.ctx.
func bypassArg(r *request) {
	if v, ok := r.get("bypassDocumentValidation"); ok && truthy(v) {
		r.ctx = withBypass(r.ctx)
	}
}

// validationFields renders a validation failure's errInfo for a write
// error or error reply.
func validationFields(err error) (bson.D, bool) {
	var ve *validationError
	if !errors.As(err, &ve) {
		return nil, false
	}
	return bson.D{
		{Key: "code", Value: ve.err.Code},
		{Key: "errmsg", Value: ve.err.Message},
		{Key: "errInfo", Value: value.CloneDoc(ve.errInfo)},
	}, true
}
