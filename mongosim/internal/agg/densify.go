package agg

import (
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/expr"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
	"github.com/sturdy-go/sturdy/mongosim/internal/value"
)

// $densify and $fill.
//
// $densify sorts as mongod does ({partition fields…, field: 1}, or only
// {field: 1} for "full" bounds) and walks the documents: each partition
// steps through a grid of values anchored at the range's lower bound
// (explicit bounds), the partition's first value ("partition"), or the
// smallest value overall ("full"); grid values no document holds become
// new documents carrying only the partition fields and the field. Documents
// whose field is null or missing pass through unchanged.

const maxDensifyDocs = 500000 // mongod's internalQueryMaxAllowedDensifyDocs

const (
	densifyExplicit = iota
	densifyFull
	densifyPartition
)

type densifyStage struct {
	parts     []string
	partPaths [][]string
	step      any
	unit      string
	mode      int
	lo, hi    any
	sort      *query.Sort
}

func compileDensify(arg any) (stage, error) {
	spec, ok := value.ToDoc(arg)
	if !ok {
		return nil, cmderr.New(cmderr.FailedToParse, "The $densify stage specification must be an object, found %s", value.TypeName(arg))
	}
	field, partFields, rng, err := parseDensifySpec(spec)
	if err != nil {
		return nil, err
	}
	s := &densifyStage{}
	bounds, err := s.parseRange(rng)
	if err != nil {
		return nil, err
	}
	if err := s.parseBounds(bounds); err != nil {
		return nil, err
	}
	if err := s.compilePaths(field, partFields); err != nil {
		return nil, err
	}
	return s, nil
}

// parseDensifySpec reads $densify's top-level fields, all of them checked
// for type and field and range required.
func parseDensifySpec(spec bson.D) (field string, partFields []string, rng bson.D, err error) {
	haveField, haveRange := false, false
	for _, e := range spec {
		switch e.Key {
		case "field":
			f, ok := e.Value.(string)
			if !ok {
				return "", nil, nil, cmderr.New(cmderr.TypeMismatch, "BSON field '$densify.field' is the wrong type '%s', expected type 'string'", value.TypeName(e.Value))
			}
			field, haveField = f, true
		case "partitionByFields":
			a, ok := value.ToArray(e.Value)
			if !ok {
				return "", nil, nil, cmderr.New(cmderr.TypeMismatch, "BSON field '$densify.partitionByFields' is the wrong type '%s', expected type 'array'", value.TypeName(e.Value))
			}
			for i, x := range a {
				f, ok := x.(string)
				if !ok {
					return "", nil, nil, cmderr.New(cmderr.TypeMismatch, "BSON field '$densify.partitionByFields.%d' is the wrong type '%s', expected type 'string'", i, value.TypeName(x))
				}
				partFields = append(partFields, f)
			}
		case "range":
			d, ok := value.ToDoc(e.Value)
			if !ok {
				return "", nil, nil, cmderr.New(cmderr.TypeMismatch, "BSON field '$densify.range' is the wrong type '%s', expected type 'object'", value.TypeName(e.Value))
			}
			rng, haveRange = d, true
		default:
			return "", nil, nil, cmderr.New(40415, "BSON field '$densify.%s' is an unknown field.", e.Key)
		}
	}
	if !haveField {
		return "", nil, nil, cmderr.New(40414, "BSON field '$densify.field' is missing but a required field")
	}
	if !haveRange {
		return "", nil, nil, cmderr.New(40414, "BSON field '$densify.range' is missing but a required field")
	}
	return field, partFields, rng, nil
}

// parseRange reads range's step and unit into s and returns its bounds.
func (s *densifyStage) parseRange(rng bson.D) (any, error) {
	var bounds any
	haveStep, haveBounds := false, false
	for _, e := range rng {
		switch e.Key {
		case "step":
			s.step, haveStep = e.Value, true
		case "bounds":
			bounds, haveBounds = e.Value, true
		case "unit":
			u, ok := e.Value.(string)
			if !ok {
				return nil, cmderr.New(cmderr.TypeMismatch, "BSON field '$densify.range.unit' is the wrong type '%s', expected type 'string'", value.TypeName(e.Value))
			}
			s.unit = u
		default:
			return nil, cmderr.New(40415, "BSON field '$densify.range.%s' is an unknown field.", e.Key)
		}
	}
	if !haveStep {
		return nil, cmderr.New(40414, "BSON field '$densify.range.step' is missing but a required field")
	}
	if !haveBounds {
		return nil, cmderr.New(40414, "BSON field '$densify.range.bounds' is missing but a required field")
	}
	if f, ok := value.ToFloat(s.step); !value.IsNumber(s.step) || !ok || !(f > 0) {
		return nil, cmderr.New(5733401, "The step parameter in a range statement must be a strictly positive numeric value")
	}
	if s.unit != "" {
		if _, ok := value.ToInt64(s.step); !ok {
			return nil, cmderr.New(6586400, "The step parameter in a range statement must be a whole number when densifying a date range")
		}
		if !expr.IsTimeUnit(s.unit) {
			return nil, cmderr.New(cmderr.FailedToParse, "unknown time unit value: %s", s.unit)
		}
	}
	return bounds, nil
}

// parseBounds sets the mode from bounds: "full", "partition", or an
// ascending pair of numbers (of the step's type) or of dates (with a unit).
func (s *densifyStage) parseBounds(bounds any) error {
	if b, ok := bounds.(string); ok {
		switch b {
		case "full":
			s.mode = densifyFull
		case "partition":
			s.mode = densifyPartition
		default:
			return cmderr.New(5946802, "Bounds string must either be 'full' or 'partition'")
		}
		return nil
	}
	a, ok := value.ToArray(bounds)
	if !ok {
		return cmderr.New(5733404, "The bounds in a range statement must be the string 'full', 'partition', or an ascending array of two numbers or two dates")
	}
	if len(a) != 2 {
		return cmderr.New(5733403, "A bounding array in a range statement must have exactly two elements")
	}
	if expr.CompareValues(a[0], a[1]) > 0 {
		return cmderr.New(5733402, "A bounding array must be an ascending array of either two dates or two numbers")
	}
	_, d0 := a[0].(bson.DateTime)
	_, d1 := a[1].(bson.DateTime)
	switch {
	case value.IsNumber(a[0]):
		if s.unit != "" {
			return cmderr.New(5733409, "Numeric bounds may not have unit parameter")
		}
		if !value.IsNumber(a[1]) {
			return cmderr.New(5733406, "A bounding array must contain either both dates or both numeric types")
		}
		if value.TypeName(a[0]) != value.TypeName(a[1]) || value.TypeName(a[0]) != value.TypeName(s.step) {
			return cmderr.New(5876900, "Upper bound, lower bound, and step must all have the same type")
		}
	case d0:
		if !d1 {
			return cmderr.New(5733405, "A bounding array must contain either both dates or both numeric types")
		}
		if s.unit == "" {
			return cmderr.New(5733410, "A bounding array of dates must specify a unit")
		}
	default:
		return cmderr.New(5946800, "Explicit bounds must be numeric or dates")
	}
	s.mode, s.lo, s.hi = densifyExplicit, a[0], a[1]
	return nil
}

// compilePaths checks the field and partition paths and builds the sort
// the stage orders its input by: partition fields (unless bounds are full),
// then the field.
func (s *densifyStage) compilePaths(field string, partFields []string) error {
	parts, err := checkFieldPath("$densify", field)
	if err != nil {
		return err
	}
	s.parts = parts
	sortSpec := bson.D{}
	for _, f := range partFields {
		pp, err := checkFieldPath("$densify", f)
		if err != nil {
			return err
		}
		s.partPaths = append(s.partPaths, pp)
		if s.mode != densifyFull {
			sortSpec = append(sortSpec, bson.E{Key: f, Value: int32(1)})
		}
	}
	if s.mode == densifyPartition && len(partFields) == 0 {
		return cmderr.New(5733408, "One cannot specify the bounds as 'partition' without specifying a non-empty array of partitionByFields. You may have meant to specify 'full' bounds.")
	}
	sortSpec = append(sortSpec, bson.E{Key: field, Value: int32(1)})
	s.sort, err = query.CompileSort(sortSpec)
	return err
}

type densifyPartitionState struct {
	key     bson.D
	next    any
	started bool
}

func (s *densifyStage) run(rt *runtime, in []bson.D) ([]bson.D, error) {
	docs := append([]bson.D(nil), in...)
	s.sort.SortDocs(docs)
	d := &densifyRun{s: s, rt: rt, out: make([]bson.D, 0, len(docs)), states: map[string]*densifyPartitionState{}}
	if len(s.partPaths) == 0 {
		d.state(nil) // one partition, even with no documents (explicit bounds)
	}
	for i, doc := range docs {
		if err := rt.checkEvery(i); err != nil {
			return nil, err
		}
		if err := d.add(doc); err != nil {
			return nil, err
		}
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	return d.out, nil
}

// densifyRun is one execution of $densify over its sorted input: the
// output so far, each partition's next value to generate (in first-seen
// order), and the smallest and largest field values seen ("full" bounds).
type densifyRun struct {
	s                    *densifyStage
	rt                   *runtime
	out                  []bson.D
	states               map[string]*densifyPartitionState
	order                []*densifyPartitionState
	generated            int
	globalMin, globalMax any
}

// emit appends a generated document holding the partition key and v.
func (d *densifyRun) emit(ps *densifyPartitionState, v any) error {
	d.generated++
	if d.generated > maxDensifyDocs {
		return cmderr.New(5897900, "Generated %d documents in $densify, which is over the limit of %d. Increase the 'internalQueryMaxAllowedDensifyDocs' parameter to allow more generated documents", d.generated, maxDensifyDocs)
	}
	if err := d.rt.checkEvery(d.generated); err != nil {
		return err
	}
	d.out = append(d.out, setPath(value.CloneDoc(ps.key), d.s.parts, v))
	return nil
}

// state returns doc's partition, creating it on first sight.
func (d *densifyRun) state(doc bson.D) *densifyPartitionState {
	var key bson.D
	for _, pp := range d.s.partPaths {
		if v, ok := getPath(doc, pp); ok {
			key = setPath(key, pp, v)
		}
	}
	k := groupKey(key)
	ps := d.states[k]
	if ps == nil {
		ps = &densifyPartitionState{key: key}
		d.states[k] = ps
		d.order = append(d.order, ps)
	}
	return ps
}

// add generates the documents missing before doc in its partition, then
// passes doc through.
func (d *densifyRun) add(doc bson.D) error {
	s := d.s
	v, ok := getPath(doc, s.parts)
	if !ok || expr.IsNullish(v) {
		d.out = append(d.out, doc)
		return nil
	}
	if err := s.checkValue(v); err != nil {
		return err
	}
	ps := d.state(doc)
	bound := any(nil) // exclusive upper limit of generated values
	switch s.mode {
	case densifyExplicit:
		if !ps.started {
			ps.next, ps.started = s.lo, true
		}
		bound = s.hi
	case densifyFull:
		if d.globalMin == nil {
			d.globalMin = v
		}
		d.globalMax = v
		if !ps.started {
			ps.next, ps.started = d.globalMin, true
		}
	default:
		if !ps.started {
			n, err := s.inc(v)
			if err != nil {
				return err
			}
			ps.next, ps.started = n, true
			d.out = append(d.out, doc)
			return nil
		}
	}
	for expr.CompareValues(ps.next, v) < 0 && (bound == nil || expr.CompareValues(ps.next, bound) < 0) {
		if err := d.emitNext(ps); err != nil {
			return err
		}
	}
	if expr.CompareValues(ps.next, v) == 0 && (bound == nil || expr.CompareValues(v, bound) < 0) {
		n, err := s.inc(v)
		if err != nil {
			return err
		}
		ps.next = n
	}
	d.out = append(d.out, doc)
	return nil
}

// emitNext emits the partition's next value and steps it.
func (d *densifyRun) emitNext(ps *densifyPartitionState) error {
	if err := d.emit(ps, ps.next); err != nil {
		return err
	}
	n, err := d.s.inc(ps.next)
	if err != nil {
		return err
	}
	ps.next = n
	return nil
}

// finish runs after the last document: explicit bounds fill each partition
// up to the upper bound, "full" fills each partition up to the largest value.
func (d *densifyRun) finish() error {
	s := d.s
	var limit any
	inclusive := false
	switch s.mode {
	case densifyExplicit:
		limit = s.hi
	case densifyFull:
		if len(s.partPaths) == 0 {
			return nil
		}
		limit, inclusive = d.globalMax, true
	default:
		return nil
	}
	slices.SortStableFunc(d.order, func(a, b *densifyPartitionState) int { return expr.CompareValues(a.key, b.key) })
	for _, ps := range d.order {
		if !ps.started {
			if s.mode != densifyExplicit {
				continue
			}
			ps.next = s.lo
		}
		for {
			c := expr.CompareValues(ps.next, limit)
			if c > 0 || (c == 0 && !inclusive) {
				break
			}
			if err := d.emitNext(ps); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *densifyStage) checkValue(v any) error {
	_, isDate := v.(bson.DateTime)
	if !value.IsNumber(v) && !isDate {
		return cmderr.New(5733201, "Densify field type must be numeric or a date")
	}
	if isDate && s.unit == "" {
		return cmderr.New(6053600, "Encountered date densify value in collection when step does not have a date unit.")
	}
	if !isDate && s.unit != "" {
		return cmderr.New(6053600, "Encountered numeric densify value in collection when step has a date unit.")
	}
	return nil
}

// inc is v plus one step.
func (s *densifyStage) inc(v any) (any, error) {
	if d, ok := v.(bson.DateTime); ok {
		n, _ := value.ToInt64(s.step)
		t, ok := expr.AddTimeUnits(d.Time().UTC(), s.unit, n)
		if !ok {
			return nil, cmderr.New(cmderr.BadValue, "$densify stepped past the dates BSON holds")
		}
		return bson.NewDateTimeFromTime(t), nil
	}
	return arith("$add", v, s.step)
}

// $fill is $setWindowFields with $locf/$linearFill for the "method"
// outputs followed by $addFields with $ifNull for the "value" outputs, as
// mongod rewrites it.

type fillStage struct{ stages []stage }

func compileFill(arg any) (stage, error) {
	spec, ok := value.ToDoc(arg)
	if !ok {
		return nil, cmderr.New(cmderr.FailedToParse, "The $fill stage specification must be an object, found %s", value.TypeName(arg))
	}
	fs, err := parseFillSpec(spec)
	if err != nil {
		return nil, err
	}
	windowOut, addFieldsSpec, err := fillOutputs(fs.output)
	if err != nil {
		return nil, err
	}
	f := &fillStage{}
	if len(windowOut) > 0 {
		swf, err := fs.setWindowFieldsSpec(windowOut)
		if err != nil {
			return nil, err
		}
		st, err := compileSetWindowFields(swf)
		if err != nil {
			return nil, err
		}
		f.stages = append(f.stages, st)
	} else if fs.havePartitionBy && fs.havePartitionFields {
		return nil, cmderr.New(6050204, "Maximum one of 'partitionBy' and 'partitionByFields can be specified in '$fill'")
	}
	if len(addFieldsSpec) > 0 {
		st, err := compileAddFields("$addFields", addFieldsSpec)
		if err != nil {
			return nil, err
		}
		f.stages = append(f.stages, st)
	}
	return f, nil
}

// fillSpec is $fill's top-level fields, type-checked.
type fillSpec struct {
	sortBy, partitionBy                  any
	partitionFields                      bson.A
	havePartitionBy, havePartitionFields bool
	output                               bson.D
}

func parseFillSpec(spec bson.D) (fillSpec, error) {
	var fs fillSpec
	haveOutput := false
	for _, e := range spec {
		switch e.Key {
		case "sortBy":
			if _, ok := value.ToDoc(e.Value); !ok {
				return fillSpec{}, cmderr.New(cmderr.TypeMismatch, "BSON field '$fill.sortBy' is the wrong type '%s', expected type 'object'", value.TypeName(e.Value))
			}
			fs.sortBy = e.Value
		case "partitionBy":
			_, isDoc := value.ToDoc(e.Value)
			if _, isStr := e.Value.(string); !isStr && !isDoc {
				return fillSpec{}, cmderr.New(cmderr.TypeMismatch, "BSON field '$fill.partitionBy' is the wrong type '%s', expected types '[string, object]'", value.TypeName(e.Value))
			}
			fs.partitionBy, fs.havePartitionBy = e.Value, true
		case "partitionByFields":
			a, ok := value.ToArray(e.Value)
			if !ok {
				return fillSpec{}, cmderr.New(cmderr.TypeMismatch, "BSON field '$fill.partitionByFields' is the wrong type '%s', expected type 'array'", value.TypeName(e.Value))
			}
			for i, x := range a {
				if _, ok := x.(string); !ok {
					return fillSpec{}, cmderr.New(cmderr.TypeMismatch, "BSON field '$fill.partitionByFields.%d' is the wrong type '%s', expected type 'string'", i, value.TypeName(x))
				}
			}
			fs.partitionFields, fs.havePartitionFields = a, true
		case "output":
			d, ok := value.ToDoc(e.Value)
			if !ok {
				return fillSpec{}, cmderr.New(cmderr.TypeMismatch, "BSON field '$fill.output' is the wrong type '%s', expected type 'object'", value.TypeName(e.Value))
			}
			fs.output, haveOutput = d, true
		default:
			return fillSpec{}, cmderr.New(40415, "BSON field '$fill.%s' is an unknown field.", e.Key)
		}
	}
	if !haveOutput {
		return fillSpec{}, cmderr.New(40414, "BSON field '$fill.output' is missing but a required field")
	}
	if len(fs.output) == 0 {
		return fillSpec{}, cmderr.New(6050203, "The output field in '$fill' must contain an object with at least one element")
	}
	return fs, nil
}

// fillOutputs translates $fill's output: methods become $setWindowFields
// outputs ($locf, $linearFill), values become $addFields with $ifNull.
func fillOutputs(outDoc bson.D) (windowOut, addFieldsSpec bson.D, err error) {
	for _, e := range outDoc {
		fs, ok := value.ToDoc(e.Value)
		if !ok {
			return nil, nil, cmderr.New(6050200, "Each fill output specification must be an object with exactly one field")
		}
		var method, val any
		haveMethod, haveValue := false, false
		for _, f := range fs {
			switch f.Key {
			case "method":
				m, ok := f.Value.(string)
				if !ok {
					return nil, nil, cmderr.New(cmderr.TypeMismatch, "BSON field '$fill.method' is the wrong type '%s', expected type 'string'", value.TypeName(f.Value))
				}
				method, haveMethod = m, true
			case "value":
				val, haveValue = f.Value, true
			default:
				return nil, nil, cmderr.New(40415, "BSON field '$fill.%s' is an unknown field.", f.Key)
			}
		}
		if haveMethod {
			if haveValue {
				return nil, nil, cmderr.New(6050201, "Each fill output specification must have exactly one of 'method' or 'value' fields, not both")
			}
			fn := map[any]string{"locf": "$locf", "linear": "$linearFill"}[method]
			if fn == "" {
				return nil, nil, cmderr.New(6050202, "Method must be either locf or linear")
			}
			windowOut = append(windowOut, bson.E{Key: e.Key, Value: bson.D{{Key: fn, Value: "$" + e.Key}}})
		}
		if haveValue {
			addFieldsSpec = append(addFieldsSpec, bson.E{Key: e.Key, Value: bson.D{{Key: "$ifNull", Value: bson.A{"$" + e.Key, val}}}})
		}
	}
	return windowOut, addFieldsSpec, nil
}

// setWindowFieldsSpec is the $setWindowFields stage that fills by method,
// partitioned by partitionBy or by partitionByFields (not both).
func (fs fillSpec) setWindowFieldsSpec(windowOut bson.D) (bson.D, error) {
	swf := bson.D{{Key: "output", Value: windowOut}}
	if fs.sortBy != nil {
		swf = append(swf, bson.E{Key: "sortBy", Value: fs.sortBy})
	}
	if fs.havePartitionBy {
		if fs.havePartitionFields {
			return nil, cmderr.New(6050204, "Maximum one of 'partitionBy' and 'partitionByFields can be specified in '$fill'")
		}
		swf = append(swf, bson.E{Key: "partitionBy", Value: fs.partitionBy})
	}
	if fs.havePartitionFields {
		var pb bson.D
		for _, x := range fs.partitionFields {
			pb = append(pb, bson.E{Key: x.(string), Value: "$" + x.(string)})
		}
		swf = append(swf, bson.E{Key: "partitionBy", Value: pb})
	}
	return swf, nil
}

func (f *fillStage) run(rt *runtime, in []bson.D) ([]bson.D, error) {
	docs := in
	for _, st := range f.stages {
		var err error
		if docs, err = st.run(rt, docs); err != nil {
			return nil, err
		}
	}
	return docs, nil
}
