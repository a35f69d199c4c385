package precondition

import (
	"errors"
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
)

// The expression's variable.
const ObjectsVar = "objects"

// Cost limits: ValidatingAdmissionPolicy's (k8s.io/apiserver/pkg/apis/cel).
// PerCallLimit bounds one expression's evaluation (the base environment's
// program option); RuntimeBudget bounds one evaluation of every CEL
// precondition together, as VAP's bounds a policy's expressions together.
const (
	PerCallLimit  = celconfig.PerCallLimit
	RuntimeBudget = celconfig.RuntimeCELCostBudget
)

// MaxObjects is the list size the static cost estimate assumes for
// `objects`: an expression whose estimated cost over that many objects
// exceeds PerCallLimit is refused at config load. At runtime the per-call
// limit holds whatever the count.
const MaxObjects = 1000

// env is the API server's base CEL environment (its libraries, language
// settings and cost limits, at this build's compatibility version) with
// `objects` declared, built once.
var env = sync.OnceValues(func() (*cel.Env, error) {
	set, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(
		environment.VersionedOptions{
			IntroducedVersion: version.MajorMinor(1, 0),
			EnvOptions:        []cel.EnvOption{cel.Variable(ObjectsVar, cel.ListType(cel.DynType))},
		},
		environment.StrictCostOpt,
	)
	if err != nil {
		return nil, err
	}
	return set.Env(environment.NewExpressions)
})

// Program is a compiled expression.
type Program struct {
	prog cel.Program
	// EstimatedCost is the static estimate's maximum over MaxObjects objects.
	EstimatedCost uint64
}

// Compile compiles an expression as ValidatingAdmissionPolicy compiles
// one (k8s.io/apiserver/pkg/admission/plugin/cel), requiring a bool result
// and an estimated cost within PerCallLimit.
func Compile(expr string) (*Program, error) {
	e, err := env()
	if err != nil {
		return nil, fmt.Errorf("the CEL environment: %w", err)
	}
	ast, issues := e.Compile(expr)
	if issues != nil && issues.Err() != nil {
		return nil, fmt.Errorf("compilation failed: %s", issues.String())
	}
	if !ast.OutputType().IsExactType(cel.BoolType) {
		return nil, fmt.Errorf("must evaluate to bool but got %v", ast.OutputType())
	}
	est, err := e.EstimateCost(ast, &library.CostEstimator{SizeEstimator: sizes{}})
	if err != nil {
		return nil, fmt.Errorf("cost estimation failed: %w", err)
	}
	if est.Max > PerCallLimit {
		return nil, fmt.Errorf("estimated cost %d over %d objects exceeds the per-expression limit %d (ValidatingAdmissionPolicy's): narrow what it reads, or test fewer fields per object", est.Max, MaxObjects, PerCallLimit)
	}
	prog, err := e.Program(ast, cel.InterruptCheckFrequency(celconfig.CheckFrequency))
	if err != nil {
		return nil, fmt.Errorf("program instantiation failed: %w", err)
	}
	return &Program{prog: prog, EstimatedCost: est.Max}, nil
}

// sizes bounds `objects` for the static estimate.
type sizes struct{}

func (sizes) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	if p := n.Path(); len(p) == 1 && p[0] == ObjectsVar {
		return &checker.SizeEstimate{Min: 0, Max: MaxObjects}
	}
	return nil
}

func (sizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// ErrBudget: the evaluation ran out of its cost budget.
var ErrBudget = errors.New("cost budget exceeded")

// Eval evaluates the program over the objects (each as its JSON map) within
// budget, the runtime cost left of this round (RuntimeBudget at first); it
// returns the result and the budget left. An evaluation error (a missing
// field, a type mismatch, the per-call limit) is returned as such: the
// precondition is then unknown, which fails closed.
func (p *Program) Eval(objects []any, budget int64) (bool, int64, error) {
	if budget <= 0 {
		return false, budget, ErrBudget
	}
	val, details, err := p.prog.Eval(map[string]any{ObjectsVar: objects})
	if details != nil && details.ActualCost() != nil {
		cost := int64(*details.ActualCost())
		budget -= cost
		if budget < 0 {
			return false, budget, fmt.Errorf("%w: this evaluation cost %d, over the %d left of the %d all CEL preconditions share (ValidatingAdmissionPolicy's runtime budget)", ErrBudget, cost, cost+budget, RuntimeBudget)
		}
	}
	if err != nil {
		return false, budget, err
	}
	b, ok := val.Value().(bool)
	if !ok {
		return false, budget, fmt.Errorf("returned %v (%T), expected a bool", val, val.Value())
	}
	return b, budget, nil
}
