package cmderr

// Codes of views, validators and TTL indexes.
const (
	CannotCreateIndex               = 67
	GraphContainsCycle              = 93
	DocumentValidationFailure       = 121
	CommandNotSupportedOnView       = 166
	OptionNotSupportedOnView        = 167
	ViewDepthLimitExceeded          = 170
	QueryFeatureNotAllowed          = 224
	InvalidIndexSpecificationOption = 197
	AmbiguousIndexKeyPattern        = 249
)

func init() {
	for code, name := range map[int32]string{
		CannotCreateIndex: "CannotCreateIndex", GraphContainsCycle: "GraphContainsCycle",
		DocumentValidationFailure: "DocumentValidationFailure", CommandNotSupportedOnView: "CommandNotSupportedOnView",
		OptionNotSupportedOnView: "OptionNotSupportedOnView", ViewDepthLimitExceeded: "ViewDepthLimitExceeded",
		QueryFeatureNotAllowed: "QueryFeatureNotAllowed", InvalidIndexSpecificationOption: "InvalidIndexSpecificationOption", AmbiguousIndexKeyPattern: "AmbiguousIndexKeyPattern",
	} {
		names[code] = name
	}
}
