"""Which trace events are a step's work and which category each belongs to: data, one table per
(profiler family, device kind), read by harness/judge/attribution.py.

A table says
- `work`: the events that occupy a lane (one thread, or one device stream) with work, each with the
  category its kind of event falls back on when no name rule names it;
- `host`: events of the thread that drives the work (a GPU's host; the Python thread beside
  XLA:CPU's executor threads), counted only while no work lane runs: the work then waits on the
  host (dispatch, a launch, Python, a compilation), so that time is the host's;
- `context`: events that run nothing themselves but enclose work (torch's user annotations as the
  device sees them), read only for the enclosing rules;
- `transparent`: names that are never work: waits, markers, the step annotation itself;
- `rules`: ordered (category, name pattern) pairs, the first full match wins; an event no rule
  names takes its nearest ancestor's (on its lane) or its kind's fallback, else it is unattributed;
- `enclosing`: rules on ancestors that override both (torch's optimiser annotations: everything
  inside `Optimizer.step#AdamW.step` is the optimiser update, whatever its operations are called).

The names come from the recorded CPU traces in tests/data/profiles (jax.profiler 0.10.2 and
torch.profiler 2.13.0) and, for GPUs, from the profilers' own sources: CUPTI device events land on
process `/device:GPU:N`, lines `Stream #N(...)`, named after the kernel (XLA's
backends/profiler/gpu/cupti_collector.cc, memory copies `MemcpyH2D`...), and torch's Kineto export
puts kernels, copies and memsets (cat `kernel`, `gpu_memcpy`, `gpu_memset`: `Memcpy HtoD (Pageable
-> Device)`) and `gpu_user_annotation` projections of user annotations on the device's stream lanes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.judge.breakdown import CATEGORIES
from suites.contract.profiles import STEP  # the annotation around each profiled step

IDLE = "(idle: no operation running)"  # the operation name of a step's time no lane spends on work


def _re(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.DOTALL)


@dataclass(frozen=True)
class Rule:
    category: str
    name: re.Pattern[str]  # a full match of the event's name (after the table's `strip`)
    module: re.Pattern[str] | None = None  # and of its `hlo_module` argument


@dataclass(frozen=True)
class Lanes:
    """A kind of event, selected by category, an argument it carries, or its process/thread names
    (each a full match; None: any), and the rules that name its events."""

    what: str  # in words, for notes and docs
    cat: re.Pattern[str] | None = None
    arg: str | None = None  # an argument the event carries: only "hlo_op" (part of the classification cache key)
    process: re.Pattern[str] | None = None
    thread: re.Pattern[str] | None = None
    rules: tuple[Rule, ...] = ()  # ordered: the first full match names the event
    fields: tuple[str, ...] = ()  # arguments tried against `rules` when the name matches none
    default: str | None = None  # the category of its events that no rule names; None: unattributed
    # XLA operations whose contents are known (the profile's `ops` sidecar): the first rule one of
    # its opcodes matches names the operation, before `rules`; except names matching `by_name`
    # (control flow, whose contents are its body's operations, timed as events of their own).
    contents: tuple[Rule, ...] = ()
    by_name: re.Pattern[str] | None = None


@dataclass(frozen=True)
class Table:
    family: str  # "jax" | "torch"
    device_kind: str  # "cpu" | "gpu"
    steps: Lanes  # where the step annotations are read (not their device projections)
    work: tuple[Lanes, ...]
    transparent: re.Pattern[str]
    enclosing: tuple[Rule, ...] = ()
    host: tuple[Lanes, ...] = ()
    context: tuple[Lanes, ...] = ()
    strip: re.Pattern[str] | None = None  # removed from a name before matching (XLA's instance number)
    link: tuple[str, str] | None = None  # (device argument, host argument) tying a kernel to its launch


def _rules(*pairs: tuple[str, str]) -> tuple[Rule, ...]:
    return tuple(Rule(category, _re(pattern)) for category, pattern in pairs)


# -- JAX (XLA) ------------------------------------------------------------------------------------
#
# An XLA op event is named after its HLO instruction (`dot.3`, `multiply_add_fusion.12`), and its
# `hlo_op` argument repeats it; the instance number is stripped before matching. A loop fusion is
# named after the opcodes it fuses, so "reduce" in a fusion's name means a reduction.
#
# `ynn_fusion` is XLA:CPU handing a subgraph to YNNPACK (backends/cpu/ynn_support.cc: dots, and
# also reductions and elementwise chains), under the same name whatever it holds. It counts as
# matmul, from the recorded traces: the xla suite's `matmul` runs exactly one `ynn_fusion` (module
# jit_matmul) and no `dot`; the CIFAR-10 CNN runs no `convolution` op but spends 81 % of its op time
# in `ynn_fusion`s of 0.7 ms (median) each; in the GPT step they are the larger ops (median 3.9 us
# against 1.0 us for the loop fusions). But the GPT step runs 83 of them per step for a model of
# about 40 matrix products, so some are elementwise or reductions: without the sidecar below, JAX's
# CPU matmul share is an upper bound. A YNNPACK fusion in a module that is itself a jnp reduction
# (`jit__mean`, `jit__reduce_sum`, as the xla suite's `mean_sum` runs it) is a reduction. Where the
# profile recorded what each operation runs (its `ops` sidecar, suites/runtime/hlo_ops.py), that
# decides first (`_XLA_CONTENTS`), and the name rules only name what the sidecar does not list.

# An instruction is named after its HLO opcode (`copy`, `reduce-window`) or, when JAX emitted it, after
# the JAX primitive it came from (`dot_general.1`, `reduce_sum`, `tanh`); fusions after the opcodes
# they fuse (`multiply_subtract_fusion`), `wrapped_*` after the one operation they wrap.
_XLA_COLLECTIVES = (
    r"all-reduce|all-gather|reduce-scatter|all-to-all|ragged-all-to-all|collective-permute|collective-broadcast|"
    r"send|recv|all_gather\w*|all_to_all\w*|ragged_all_to_all|psum\w*|pmax|pmin|ppermute\w*|pbroadcast\w*|psend|"
    r"precv|preduced|reduce_scatter\w*|unreduced_\w+"
)
_XLA_COLLECTIVE = (
    rf"(wrapped_)?({_XLA_COLLECTIVES})(-start|-done)?|.*(all-reduce|all-gather|reduce-scatter|all-to-all|"
    r"collective-permute).*|nccl.*|.*Nccl.*|.*nccl[A-Z].*"
)
_JNP_REDUCTION_MODULE = (
    r"jit__?(mean|sum|reduce_\w+|var|std|nan\w+|max|min|prod|amax|amin|argmax|argmin|logsumexp|norm|average|"
    r"count_nonzero|all|any|cumsum|cumprod)"
)
_XLA_MATMUL_OPS = (
    r"dot|dot_general|ragged_dot_general|convolution|conv_general_dilated|triangular-solve|triangular_solve|cholesky|"
    r"cholesky_update|lu|qr|eigh?|svd|schur|hessenberg|geqrf|geqp3|ormqr|householder_product|tridiagonal_solve|"
    r"symmetric_product"
)
_XLA_MATMUL = (
    rf"(wrapped_)?({_XLA_MATMUL_OPS})|(ynn|xnn|onednn|mkl)_fusion|"
    r".*(dot|convolution|conv_general|gemm|matmul).*fusion.*|__onednn\$.*|__cublas\$.*"
)
_XLA_REDUCTION_OPS = (
    r"reduce|reduce_(sum|max|min|prod|and|or|xor)|reduce-window|reduce_window\w*|select-and-scatter|"
    r"select_and_scatter\w*|select_and_gather_add|argmax|argmin|cumsum|cumprod|cummax|cummin|cumlogsumexp"
)
_XLA_REDUCTION = (
    rf"(wrapped_)?({_XLA_REDUCTION_OPS})|.*reduce(?![-_]precision).*fusion.*|"
    r".*(reduction|softmax|norm_|argmax|argmin|cumsum).*fusion.*"
)
# Compiled control flow: its own time is the runtime between the operations of its body.
_XLA_CONTROL = (
    r"while|conditional|call|scan|cond|(wrapped_)?(tuple|get-tuple-element|bitcast|parameter|constant|after-all|"
    r"after_all|opt-barrier|optimization-barrier|optimization_barrier|add-dependency|domain|create_token)"
)
# Every other HLO opcode (xla/hlo/ir/hlo_opcode.h) and JAX primitive (jax.lax) is elementwise or data
# movement: "other kernels".
_XLA_OPCODES = (
    r"abs|add|and|atan2|bitcast-convert|broadcast|cbrt|ceil|clamp|clz|compare|complex|concatenate|convert|copy|"
    r"copy-start|copy-done|cosine|cos|divide|dynamic-slice|dynamic-update-slice|erf|exponential|"
    r"exponential-minus-one|fft|floor|gather|imag|iota|is-finite|log|log-plus-one|logistic|map|maximum|minimum|"
    r"multiply|negate|not|or|pad|popcnt|power|real|reduce-precision|remainder|reshape|reverse|rng|"
    r"rng-bit-generator|rng-get-and-update-state|round-nearest-afz|round-nearest-even|rsqrt|scatter|select|"
    r"shift-left|shift-right-arithmetic|shift-right-logical|sign|sine|sin|slice|sort|sqrt|stochastic-convert|"
    r"subtract|tan|tanh|top-k|transpose|xor|dynamic-reshape|set-dimension-size|get-dimension-size"
)
_JAX_ELEMENTWISE = (
    r"acos|acosh|asin|asinh|atan|atanh|bessel_i0e|bessel_i1e|bitcast_convert_type|broadcast_in_dim|conj|"
    r"convert_element_type|cosh|digamma|div|dynamic_slice|dynamic_update_slice|empty|eq|erf_inv|erfc|exp|exp2|"
    r"expm1|ge|gt|igamma\w*|integer_pow|is_finite|le|lgamma|log1p|lt|lu_pivots_to_permutation|max|min|mul|mulhi|"
    r"ne|neg|nextafter|polygamma|population_count|pow|reduce_precision|regularized_incomplete_beta|rem|rev|"
    r"rng_bit_generator|rng_uniform|round|scatter-\w+|scatter_\w+|select_n|shift_left|shift_right_arithmetic|"
    r"shift_right_logical|sinh|split|square|squeeze|stack|sub|tile|top_k|tridiagonal|unstack|zeta"
)
# What an operation runs, as the sidecar lists it (HLO opcodes, `custom-call:<target>`), in order of
# precedence: a fusion holding a dot and an add is a matrix product. A custom call whose target no
# rule names stays unattributed.
_XLA_CONTENTS = _rules(
    (
        "collective",
        r"all-reduce(-start)?|all-gather(-start)?|reduce-scatter|all-to-all|ragged-all-to-all|"
        r"collective-permute(-start)?|collective-broadcast|send|recv|custom-call:.*([Nn]ccl|[Cc]ollective).*",
    ),
    ("optimizer", r"scope:optimizer"),  # jax.named_scope("optimizer") around the update (suites/runtime/hlo_ops.py)
    ("attention", r"scope:attention|custom-call:.*(fmha|FMHA|flash|[Aa]ttention|sdpa).*"),
    (
        "matmul",
        r"dot|convolution|triangular-solve|cholesky|ragged-dot|"
        r"custom-call:.*(gemm|Gemm|matmul|cublas|onednn|lapack|cusolver|conv|Conv|getrf|potrf|trsm|geqrf|syevd).*",
    ),
    ("reduction", r"reduce|reduce-window|select-and-scatter|custom-call:.*([Rr]educ|[Ss]oftmax|[Nn]orm).*"),
    ("elementwise", r"[a-z][a-z0-9-]*"),
)
_XLA_OPS: tuple[Rule, ...] = (
    *_rules(("collective", _XLA_COLLECTIVE)),
    Rule("reduction", _re(r"(ynn|xnn)_fusion"), _re(_JNP_REDUCTION_MODULE)),
    *_rules(
        ("matmul", _XLA_MATMUL),
        ("reduction", _XLA_REDUCTION),
        ("overhead", _XLA_CONTROL),
        ("elementwise", rf"(wrapped_)?({_XLA_OPCODES}|{_JAX_ELEMENTWISE})|wrapped_[a-z][a-z_-]*|.*fusion.*"),
    ),
)
# Values crossing between the host and XLA's buffers, on the Python thread: the inputs it puts on
# the device (`DevicePut`) and the arrays it reads back (`np.asarray(jax.Array)`). On a CPU they are
# memory copies into and out of the runtime; on a GPU the host's side of a transfer.
_JAX_TRANSFERS = _rules(
    (
        "copy",
        r"DevicePut\w*|batched_copy_array_to_devices\w*.*|BatchedCopyToDevice\w*.*|np\.asarray\(jax\.Array\)|"
        r".*_single_device_array_to_np_array.*|.*CopyToHost\w*|.*ToLiteral\w*",
    )
)
# Compilation on the Python thread (tracing, lowering, the backend compile) and in XLA's compiler.
_JAX_COMPILE = _rules(
    (
        "compile",
        r"backend_compile\w*|compile_or_get_cached|trace_to_jaxpr\w*|lower_sharding_computation|"
        r"lower_jaxpr_to_\w+|jaxpr_to_mlir_module|.*[Cc]ompile(r|_\w+)?(::\w+)?( \(.*\))?|.*Compiler::.*|"
        r"cache_miss|.*Autotun.*",
    )
)
_JAX_TRANSPARENT = _re(
    rf"{re.escape(STEP)}|end: .*|ThreadpoolListener::.*|ThunkExecutor::Execute.*|.*Await.*|Wait for .*|"
    r".*BlockHostUntilReady.*|.*block_until_ready.*|.*[Ss]ynchronize.*"
)
_PYTHON_THREAD = _re(r"python.*|MainThread.*")
_XLA_COMPILER_THREADS = _re(r"tf_xla-cpu-codegen.*|tf_PjRtCompilerThreadPool.*|.*[Cc]ompil.*")

_JAX_PYTHON = Lanes(
    "the Python thread: dispatch, argument handling, transfers",
    thread=_PYTHON_THREAD,
    rules=(*_JAX_COMPILE, *_JAX_TRANSFERS),
    default="overhead",
)
_JAX_COMPILER = Lanes("XLA's compiler threads", thread=_XLA_COMPILER_THREADS, default="compile")
_JAX_STEPS = Lanes("the step annotation on a host thread", process=_re(r"(?!/device:).*"))

# XLA:CPU runs a program's operations on its own threads while the Python thread returns or waits:
# in the recorded `inverse` step the Python thread sits inside ExecuteHelperOnSingleDevice for 627
# us while the executor thread runs `lu` and the `while` loop. So the Python thread is a host lane,
# as on a GPU: its dispatch counts where no operation runs, and is not split against the operations
# it merely overlaps (which would hand half of the LU to overhead).
JAX_CPU = Table(
    family="jax",
    device_kind="cpu",
    steps=_JAX_STEPS,
    work=(
        Lanes(
            "XLA operations (events with an hlo_op argument)",
            arg="hlo_op",
            rules=_XLA_OPS,
            contents=_XLA_CONTENTS,
            by_name=_re(_XLA_CONTROL),
        ),
        _JAX_COMPILER,
    ),
    host=(_JAX_PYTHON,),
    transparent=_JAX_TRANSPARENT,
    strip=_re(r"\.\d+$"),
)

# On a GPU, XLA names a kernel after its fusion (`loop_add_fusion`, `input_reduce_fusion`) or the
# library's own kernel (cuBLAS `sm90_xmma_gemm_*`, `nvjet_*`, cuDNN, CUTLASS); `hlo_op` names the
# instruction that launched it, tried when the kernel's name says nothing.
_GPU_KERNELS = _rules(
    ("copy", r"Memcpy ?(H2D|D2H|P2P|HtoD|DtoH|PtoP|Other).*"),
    ("elementwise", r"Memcpy ?(D2D|DtoD).*|Memset.*"),
    ("collective", r"nccl.*|.*[Nn]ccl[A-Z_].*|.*(all_?reduce|all_?gather|reduce_?scatter|alltoall).*"),
    # torch's fused optimisers (`fused=True`): one kernel per parameter group, named after the update.
    ("optimizer", r".*(FusedAdam|FusedSgd|FusedSGD|fused_adam|fused_sgd|FusedAdagrad).*"),
    ("attention", r".*(flash|fmha|FMHA|sdpa|SDPA|[Aa]ttention|_attn|attn_).*"),
    (
        "matmul",
        r".*(gemm|GEMM|Gemm|xmma|cutlass|nvjet|cublas|sgemm|hgemm|matmul|_mm_|conv|Conv|implicit_convolve|"
        r"winograd|fprop|dgrad|wgrad|triton_tem|dot_).*",
    ),
    (
        "reduction",
        r".*([Rr]educ|[Ss]oft[Mm]ax|[Ll]ayer_?[Nn]orm|[Bb]atch_?[Nn]orm|[Gg]roup_?[Nn]orm|[Rr]ms_?[Nn]orm|"
        r"welford|Welford|triton_red_|triton_per_|argmax|argmin|cross_entropy|nll_loss|NLLCriterion|[Pp]ool).*",
    ),
    # torch's pointwise kernels (`vectorized_elementwise_kernel`, `CatArrayBatchedCopy`, foreach ops'
    # `multi_tensor_apply_kernel`), Inductor's `triton_poi_*`, XLA's loop fusions.
    (
        "elementwise",
        r".*([Ee]lementwise|vectorized|unrolled|[Pp]ointwise|triton_poi|multi_tensor_apply|[Ff]ill|[Cc]opy|[Cc]at[A-Z]|"
        r"[Ii]ndex|[Gg]ather|[Ss]catter|[Ee]mbedding|[Dd]ropout|[Tt]ranspose|loop_|fusion|distribution|philox|"
        r"[Nn]chwTo|[Nn]hwcTo|[Ll]ayout).*",
    ),
)

JAX_GPU = Table(
    family="jax",
    device_kind="gpu",
    steps=_JAX_STEPS,
    work=(
        Lanes(
            "kernels and copies on the GPU's streams",
            process=_re(r"/device:GPU:\d+"),
            thread=_re(r"Stream #.*"),
            rules=(*_GPU_KERNELS, *_XLA_OPS),
            fields=("hlo_op",),
            contents=_XLA_CONTENTS,
            by_name=_re(_XLA_CONTROL),
        ),
    ),
    host=(_JAX_PYTHON, _JAX_COMPILER),
    transparent=_JAX_TRANSPARENT,
    strip=_re(r"\.\d+$"),
)


# -- PyTorch (Kineto) -----------------------------------------------------------------------------
#
# On a CPU every operator is a `cpu_op` on the thread that called it, nested as dispatch nests
# (aten::linear > aten::addmm); the autograd engine's nodes (`AddmmBackward0`, wrapped in
# `autograd::engine::evaluate_function: ...`) enclose the backward's operators. The deepest event
# is the one timed; an enclosing op's own time outside its children is its dispatch.

_ATEN_ELEMENTWISE = (
    r"add|sub|rsub|mul|div|true_divide|floor_divide|neg|abs|exp|exp2|expm1|log|log2|log10|log1p|sqrt|rsqrt|"
    r"reciprocal|pow|square|sin|cos|tan|tanh|sinh|cosh|asin|acos|atan|atan2|sigmoid|logit|sign|sgn|floor|ceil|"
    r"round|trunc|frac|fmod|remainder|clamp|clamp_min|clamp_max|clip|lerp|addcmul|addcdiv|maximum|minimum|fmax|"
    r"fmin|where|masked_fill|masked_scatter|masked_select|eq|ne|lt|le|gt|ge|equal|isclose|allclose|logical_and|"
    r"logical_or|logical_not|logical_xor|bitwise_\w+|relu|relu6|leaky_relu|prelu|gelu|silu|mish|elu|selu|celu|"
    r"hardtanh|hardswish|hardsigmoid|softplus|softshrink|threshold|glu|dropout|native_dropout|feature_dropout|"
    r"bernoulli|uniform|normal|random|randn|rand|randint|randperm|multinomial|fill|zero|zeros|zeros_like|ones|"
    r"ones_like|full|full_like|new_zeros|new_ones|new_full|new_empty_strided|scalar_tensor|arange|linspace|"
    r"copy|_copy_from|_copy_from_and_resize|clone|to|_to_copy|cat|_cat|concat|concatenate|stack|hstack|vstack|"
    r"index|index_select|index_add|index_copy|index_fill|index_put|_index_put_impl|gather|scatter|scatter_add|"
    r"scatter_reduce|embedding|embedding_dense|embedding_renorm|take|take_along_dim|put|flip|roll|repeat|"
    r"repeat_interleave|tile|tril|triu|pad|constant_pad_nd|reflection_pad\w*|replication_pad\w*|upsample\w*|"
    r"erf|erfc|erfinv|isnan|isinf|isfinite|nan_to_num|cumsum|cumprod|one_hot|bucketize|searchsorted|"
    r"sort|argsort|topk|unique\w*|nonzero|col2im|im2col|unfold|pixel_shuffle|channel_shuffle|_foreach_\w+|"
    r"polar|complex|real|imag|view_as_real|view_as_complex|conj_physical|_conj_physical|lift|lift_fresh_copy|"
    r"_unsafe_index|_unsafe_index_put|fused_moving_avg_obs_fake_quant|_amp_\w+|_fused_dropout"
)
_ATEN_REDUCTION = (
    r"sum|nansum|mean|nanmean|prod|max|min|amax|amin|aminmax|argmax|argmin|var|std|var_mean|std_mean|norm|"
    r"linalg_norm|linalg_vector_norm|linalg_matrix_norm|frobenius_norm|nuclear_norm|_foreach_norm|logsumexp|all|any|"
    r"count_nonzero|"
    r"median|nanmedian|mode|kthvalue|layer_norm|native_layer_norm|group_norm|native_group_norm|batch_norm|"
    r"native_batch_norm|_native_batch_norm_legit\w*|_batch_norm_impl_index|_batch_norm_with_update\w*|"
    r"cudnn_batch_norm|miopen_batch_norm|instance_norm|rms_norm|_fused_rms_norm|softmax|_softmax|log_softmax|"
    r"_log_softmax|_softmax_backward_data|_log_softmax_backward_data|cross_entropy_loss|nll_loss|nll_loss2d|"
    r"nll_loss_nd|nll_loss_forward|nll_loss2d_forward|mse_loss|l1_loss|smooth_l1_loss|huber_loss|"
    r"binary_cross_entropy\w*|kl_div|max_pool\w*|avg_pool\w*|adaptive_\w*pool\w*|_adaptive_\w*pool\w*|"
    r"max_unpool\w*|fractional_max_pool\w*|lp_pool\w*|cosine_similarity|pairwise_distance|cdist|_cdist_forward|dist|"
    r"renorm|embedding_bag|_embedding_bag\w*|ctc_loss|_ctc_loss"
)
_ATEN_MATMUL = (
    r"addmm|_addmm_activation|addmv|addbmm|baddbmm|addr|mm|bmm|mv|dot|vdot|inner|outer|ger|matmul|linear|bilinear|"
    r"einsum|tensordot|kron|chain_matmul|linalg_multi_dot|_int_mm|_scaled_mm|_weight_int\w+|conv\w*|_conv\w*|"
    r"convolution\w*|_convolution\w*|cudnn_convolution\w*|mkldnn_convolution\w*|mkldnn_linear\w*|_mkldnn\w*|"
    r"miopen_convolution\w*|_nnpack\w*|slow_conv\w*|thnn_conv\w*|_slow_conv2d\w*|linalg_(?!\w*norm)\w+|"
    r"_linalg_(?!check_errors)\w+|lu\w*|_lu\w*|triangular_solve|cholesky\w*|inverse|solve|lstsq|qr|svd|_svd\w*|eig\w*|"
    r"geqrf|ormqr|orgqr|matrix_exp|matrix_power|pinverse|logdet|slogdet|det|_det\w*|trace|fft_\w+|_fft_\w+|stft|istft"
)
# Views and bookkeeping: no arithmetic, the cost of dispatch and allocation.
_ATEN_VIEWS = (
    r"view|_unsafe_view|view_as|reshape|_reshape_alias|flatten|unflatten|t|transpose|permute|movedim|swapaxes|expand|"
    r"expand_as|as_strided|squeeze|unsqueeze|narrow|slice|select|split|split_with_sizes|unsafe_split|chunk|unbind|"
    r"tensor_split|detach|alias|resolve_conj|resolve_neg|conj|_neg_view|empty|empty_like|empty_strided|"
    r"_empty_affine_quantized|new_empty|resize_|resize_as_|set_|is_nonzero|size|stride|"
    r"numel|result_type|broadcast_tensors|broadcast_to|_has_compatible_shallow_copy_type|contiguous|"
    r"lift_fresh|_reshape_from_tensor|_shape_as_tensor|diagonal|unfold_backward_view|record_stream|is_same_size|"
    r"_nested_\w+_view|_version|requires_grad_|retain_grad|_make_dual|_unpack_dual|align_to|refine_names|rename|"
    r"mT|mH|T|H|numpy_T|matrix_H|adjoint|_linalg_check_errors|_assert_async|_assert_tensor_metadata|"
    r"_functional_assert_async|sym_size|sym_stride|sym_numel|_to_dense"
)


def _aten(names: str) -> str:
    """An aten operator family, in place (`add_`), out-of-place or as its backward (`gelu_backward`)."""
    return rf"aten::_?(?:{names})(?:_backward\w*|_forward\w*|_out|\.\w+)?_?"


_TORCH_COLLECTIVE = r"c10d::.*|nccl:.*|gloo:.*|record_param_comms|.*(allreduce|allgather|reduce_scatter|alltoall).*"
_TORCH_OPTIMIZER = r"Optimizer\.(step|zero_grad)#.*"
# torch.compile: dynamo_timed wraps every compile phase in a record_function "<phase> (dynamo_timed)";
# torch 2.13 names the whole frame's compilation `entire_frame_compile`.
_TORCH_COMPILE = _rules(
    (
        "compile",
        r".* \(dynamo_timed\)|entire_frame_compile|_compile\.\w+|compile_fx\w*|.*inductor_compile.*|"
        r"Lazy Function Loading|cuModuleLoad\w*|cuLibraryLoad\w*",
    )
)
# Autograd nodes: the node's own time outside its operators; named after the forward they undo.
_TORCH_AUTOGRAD = _rules(
    # The engine's own step around a node: bookkeeping, whatever the node computes.
    ("overhead", r"autograd::engine::evaluate_function: .*|torch::autograd::(AccumulateGrad|CopyBackwards|GraphRoot)"),
    ("attention", r"\w*(ScaledDotProduct|Attention|Flash)\w*Backward\d*"),
    (
        "matmul",
        r"(Addmm|Mm|Bmm|Mv|Dot|Matmul|Linear|Baddbmm|Addbmm|Addmv|Convolution|Conv\w*|MkldnnConvolution|"
        r"CudnnConvolution|SlowConv\w*|Linalg(?!\w*Norm)\w*|Lu\w*|Cholesky\w*|TriangularSolve|Einsum|"
        r"Inverse)Backward\d*",
    ),
    (
        "reduction",
        r"(Native)?(LayerNorm|BatchNorm|GroupNorm|RmsNorm|FusedRmsNorm|Softmax|LogSoftmax|NllLoss\w*|"
        r"CrossEntropy\w*|MseLoss|L1Loss|SmoothL1Loss|HuberLoss|BinaryCrossEntropy\w*|Sum|Mean|Max\w*|Min\w*|Amax|Amin|"
        r"Var\w*|Std\w*|Norm|Linalg\w*Norm|Prod|LogSumExp|\w*Pool\w*|CudnnBatchNorm)Backward\d*",
    ),
    (
        "overhead",
        r"(T|Transpose|Permute|View|UnsafeView|Reshape\w*|Expand|Squeeze\w*|Unsqueeze\w*|Split\w*|Select|"
        r"Slice|Narrow|Unbind|AsStrided|Alias|Detach|Clone|ToCopy|Unfold)Backward\d*",
    ),
    ("elementwise", r"\w+Backward\d*"),
)
_TORCH_OPS: tuple[Rule, ...] = (
    *_rules(
        ("collective", _TORCH_COLLECTIVE),
        # A tensor's value read back into Python (`.item()`): on a CPU the host-device copy there is.
        ("copy", r"aten::item|aten::_local_scalar_dense"),
        ("optimizer", r"aten::_fused_(adam|adamw|sgd|adagrad)\w*|aten::_foreach_(adam|adamw|sgd)\w*|.*FusedAdam.*"),
        (
            "attention",
            r"aten::_?scaled_dot_product\w*|aten::_flash_attention\w*|aten::_efficient_attention\w*|"
            r"aten::_fused_sdp\w*|aten::_native_multi_head_attention\w*|aten::multi_head_attention\w*|"
            r"aten::_transformer_encoder_layer_fwd",
        ),
        ("reduction", _aten(_ATEN_REDUCTION)),
        ("matmul", _aten(_ATEN_MATMUL)),
        (
            "overhead",
            _aten(_ATEN_VIEWS) + r"|detach_?|Torch-Compiled Region.*|TorchDynamo Cache Lookup|"
            r"CompiledFunction\w*|.*CompiledFxGraph.*|cudaGetDevice\w*|cudaLaunchKernel\w*|cuLaunchKernel\w*",
        ),
        ("elementwise", _aten(_ATEN_ELEMENTWISE)),
    ),
    *_TORCH_AUTOGRAD,
)
_TORCH_TRANSPARENT = _re(
    rf"{re.escape(STEP)}|cuda(Stream|Device|Event)Synchronize|cudaStreamWaitEvent|cu(Stream|Ctx|Event)Synchronize|"
    r"cudaStreamQuery|cudaEventQuery|ProfilerStep#\d+"
)
_TORCH_ENCLOSING = _rules(("optimizer", _TORCH_OPTIMIZER))

_TORCH_STEPS = Lanes("the step annotation (record_function)", cat=_re(r"user_annotation"))

TORCH_CPU = Table(
    family="torch",
    device_kind="cpu",
    steps=_TORCH_STEPS,
    work=(
        Lanes("operators (cpu_op)", cat=_re(r"cpu_op"), rules=(*_TORCH_COMPILE, *_TORCH_OPS)),
        # An annotation's own time outside its operators is Python between them: the framework's cost.
        Lanes(
            "user annotations (record_function)", cat=_re(r"user_annotation"), rules=_TORCH_COMPILE, default="overhead"
        ),
    ),
    transparent=_TORCH_TRANSPARENT,
    enclosing=_TORCH_ENCLOSING,
)

TORCH_GPU = Table(
    family="torch",
    device_kind="gpu",
    steps=_TORCH_STEPS,
    work=(
        Lanes(
            "kernels, copies and memsets on the GPU's streams",
            cat=_re(r"kernel|gpu_memcpy|gpu_memset"),
            rules=_GPU_KERNELS,
        ),
    ),
    context=(Lanes("user annotations as the device sees them", cat=_re(r"gpu_user_annotation")),),
    host=(
        Lanes(
            "the host: operators, annotations and CUDA calls",
            cat=_re(r"cpu_op|user_annotation|cuda_runtime|cuda_driver|python_function"),
            rules=_TORCH_COMPILE,
            default="overhead",
        ),
    ),
    transparent=_TORCH_TRANSPARENT,
    enclosing=_TORCH_ENCLOSING,
    link=("correlation", "correlation"),
)

TABLES: dict[tuple[str, str], Table] = {(t.family, t.device_kind): t for t in (JAX_CPU, JAX_GPU, TORCH_CPU, TORCH_GPU)}
PROFILERS = (("jax.profiler ", "jax"), ("torch.profiler ", "torch"))  # the entry's `profiler` text -> family


def family(profiler: object) -> str | None:
    """The table family of a profiles entry's `profiler` text ("jax.profiler 0.10.2"), or None."""
    if not isinstance(profiler, str):
        return None
    return next((name for prefix, name in PROFILERS if profiler.startswith(prefix)), None)


def _check() -> None:
    keys = {key for key, _ in CATEGORIES}
    for table in TABLES.values():
        lanes = (*table.work, *table.host, *table.context)
        named = [r.category for r in table.enclosing] + [r.category for lane in lanes for r in lane.rules]
        named += [r.category for lane in lanes for r in lane.contents]
        named += [lane.default for lane in lanes if lane.default is not None]
        if unknown := set(named) - keys:
            raise AssertionError(f"{table.family}/{table.device_kind}: unknown categories {sorted(unknown)}")
        if any(lane.arg not in (None, "hlo_op") for lane in lanes):
            raise AssertionError(f"{table.family}/{table.device_kind}: a lane selects by an argument other than hlo_op")


_check()
