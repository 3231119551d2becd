"""SINGA's job.conf schemas per release (transcribed from job.proto: field names, numbers, labels,
defaults; spec sections 2-3), the schema objects, and the reader of .proto files (the tables
here and users' extension files such as examples/rnnlm/rnnlm.proto)."""
from __future__ import annotations

import os

from ...diagnostics import SOURCES, Diagnostic, Loc, NetcError
from .. import prototext as pt
from ..source import read_source

VERSIONS = ("0.1", "0.2", "0.3", "dev")
V_LABEL = {"0.1": "SINGA v0.1", "0.2": "SINGA v0.2", "0.3": "SINGA v0.3", "dev": "the 2016 SINGA dev branch",
            "pre0.1": "pre-0.1 SINGA"}
PHASES = {"train": "kTrain", "test": "kTest", "val": "kVal", "kTrain": "kTrain", "kTest": "kTest",
          "kVal": "kVal", "validation": "kVal"}

# ------------------------------------------------------------------------------------------
# Schemas. Transcribed (field names, numbers, labels, defaults) from SINGA's src/proto/job.proto
# of each release, reduced to what a job.conf can contain; see the spec, sections 2-3.

_COMMON_JOB_MSGS = """
message AlgProto { optional AlgType alg = 1 [default = kUserAlg]; optional string user_alg = 2;
                   optional CDProto cd_conf = 10; extensions 101 to 200; }
message CDProto { optional int32 cd_k = 1 [default = 1]; }
message LRGenProto {
  optional ChangeMethod type = 1 [default = kUserChange]; optional string user_type = 2;
  optional float base_lr = 3 [default = 0.01];
  optional FixedStepProto fixedstep_conf = 40; optional StepProto step_conf = 41;
  optional LinearProto linear_conf = 42; optional ExponentialProto exponential_conf = 43;
  optional InverseProto inverse_conf = 44; optional InverseTProto inverset_conf = 45;
  extensions 101 to 200; }
message FixedStepProto { repeated int32 step = 28; repeated float step_lr = 29; }
message StepProto { required float gamma = 35 [default = 1]; required int32 change_freq = 40; }
message LinearProto { required int32 change_freq = 40; required float final_lr = 39; }
message ExponentialProto { required int32 change_freq = 40; }
message InverseTProto { required float final_lr = 39; }
message InverseProto { required float gamma = 1 [default = 1]; required float pow = 2 [default = 0]; }
message RMSPropProto { required float rho = 1; }
message ParamProto {
  optional string name = 1 [default = ""]; optional ParamType type = 3 [default = kParam];
  optional string user_type = 4; optional ParamGenProto init = 5;
  optional float lr_scale = 15 [default = 1]; optional float wd_scale = 16 [default = 1];
  optional string share_from = 60; optional int32 id = 90; optional int32 owner = 91 [default = -1];
  optional int32 partition_dim = 92; repeated int32 shape = 93; extensions 101 to 200; }
message ParamGenProto {
  optional InitMethod type = 1 [default = kUserInit]; optional string user_type = 2;
  optional float value = 3 [default = 1]; optional float mean = 4 [default = 0];
  optional float std = 5 [default = 1]; optional float low = 8 [default = -1];
  optional float high = 9 [default = 1]; extensions 101 to 200; }
message RGBImageProto { optional float scale = 1 [default = 1]; optional int32 cropsize = 2 [default = 0];
                        optional bool mirror = 3 [default = false]; optional string meanfile = 4 [default = ""]; }
message PrefetchProto { repeated LayerProto sublayers = 1; }
message SplitProto { optional int32 num_splits = 1 [default = 1]; }
message SoftmaxLossProto { optional int32 topk = 1 [default = 1]; optional float scale = 30 [default = 1]; }
message DataProto { required string path = 2; required int32 batchsize = 4;
                    optional int32 random_skip = 30 [default = 0]; }
message MnistProto {
  required float norm_a = 1 [default = 1]; required float norm_b = 2 [default = 0];
  optional int32 kernel = 30 [default = 0]; optional float sigma = 31 [default = 0];
  optional float alpha = 32 [default = 0]; optional float beta = 33 [default = 0];
  optional float gamma = 34 [default = 0]; optional int32 resize = 35 [default = 0];
  optional int32 elastic_freq = 36 [default = 0]; }
message DropoutProto { optional float dropout_ratio = 30 [default = 0.5]; }
message RBMProto { required int32 hdim = 1; optional bool bias_term = 2 [default = true];
                   optional bool gaussian = 3 [default = false]; }
message InnerProductProto { required int32 num_output = 1; optional bool bias_term = 30 [default = true];
                            optional bool transpose = 31 [default = false]; }
message LRNProto { required int32 local_size = 1 [default = 5]; optional float alpha = 31 [default = 1];
                   optional float beta = 32 [default = 0.75]; optional float knorm = 34 [default = 1]; }
message ReLUProto { optional float negative_slope = 1 [default = 0]; }
enum ChangeMethod { kFixed = 0; kInverseT = 1; kInverse = 2; kExponential = 3; kLinear = 4; kStep = 5;
                    kFixedStep = 6; kUserChange = 100; }
enum InitMethod { kConstant = 0; kGaussian = 1; kUniform = 2; kGaussianSqrtFanIn = 4; kUniformSqrtFanIn = 5;
                  kUniformSqrtFanInOut = 6; kUserInit = 101; }
enum ParamType { kParam = 0; kUser = 103; }
enum PoolMethod { MAX = 0; AVG = 1; }
"""

_CLUSTER = """
message ClusterProto {
  optional int32 nworker_groups = 1 [default = 1]; optional int32 nserver_groups = 2 [default = 1];
  optional int32 nworkers_per_group = 3 [default = 1]; optional int32 nservers_per_group = 4 [default = 1];
  optional int32 nworkers_per_procs = 5 [default = 1]; optional int32 nservers_per_procs = 6 [default = 1];
  %s string workspace = 10;
  optional bool server_worker_separate = 20 [default = false]; optional int32 sync_freq = 21 [default = 1];
  optional int32 start_port = 60 [default = 6723]; optional bool share_memory = 62 [default = true];
  optional int32 poll_time = 81 [default = 100]; }
"""

_JOB = """
message JobProto {
  %(R)s string name = 1; %(R)s NetProto neuralnet = 3; %(R)s AlgProto train_one_batch = 5;
  %(R)s UpdaterProto updater = 7; %(R)s ClusterProto cluster = 9; %(R)s int32 train_steps = 16;
  optional int32 disp_freq = 17 [default = 0]; %(GPU)s
  optional int32 test_freq = 20 [default = 0]; optional int32 test_steps = 21 [default = 0];
  optional int32 validate_freq = 25 [default = 0]; optional int32 validate_steps = 26 [default = 0];
  optional int32 checkpoint_freq = 30 [default = 0]; repeated string checkpoint_path = 60;
  optional int32 warmup_steps = 61 [default = 0]; optional bool debug = 62 [default = false];
  optional bool reset_param_version = 63 [default = true]; optional int32 num_openblas_threads = 64 [default = 1];
  optional int32 checkpoint_after = 80 [default = 0]; optional int32 disp_after = 81 [default = 0];
  optional int32 test_after = 82 [default = 0]; optional int32 validate_after = 83 [default = 0];
  optional bool resume = 90 [default = false]; optional int32 step = 91 [default = 0];
  optional int32 id = 92 [default = -1]; extensions 101 to 200; }
"""

SCHEMA_V01 = _JOB % {"R": "required", "GPU": ""} + _CLUSTER % "required" + _COMMON_JOB_MSGS + """
message NetProto { repeated LayerProto layer = 1; optional int32 partition_dim = 20 [default = 0]; }
message UpdaterProto {
  optional UpdaterType type = 1 [default = kUserUpdater]; optional string user_type = 2;
  optional RMSPropProto rmsprop_conf = 3; optional LRGenProto learning_rate = 11;
  optional float momentum = 31 [default = 0]; optional float weight_decay = 32 [default = 0];
  optional float delta = 35 [default = 0.00000001]; extensions 101 to 200; }
message LayerProto {
  required string name = 1; repeated string srclayers = 3; repeated ParamProto param = 12;
  repeated Phase exclude = 15; optional LayerType type = 20 [default = kUserLayer];
  optional string user_type = 21;
  optional ConvolutionProto convolution_conf = 30; optional ConcateProto concate_conf = 31;
  optional DataProto sharddata_conf = 32; optional DropoutProto dropout_conf = 33;
  optional InnerProductProto innerproduct_conf = 34; optional DataProto lmdbdata_conf = 35;
  optional MnistProto mnist_conf = 36; optional PoolingProto pooling_conf = 37;
  optional ReLUProto relu_conf = 38; optional RGBImageProto rgbimage_conf = 39;
  optional SoftmaxLossProto softmaxloss_conf = 40; optional SliceProto slice_conf = 41;
  optional SplitProto split_conf = 42; optional PrefetchProto prefetch_conf = 44;
  optional LRNProto lrn_conf = 45; optional RBMProto rbm_conf = 49;
  optional EuclideanLossProto euclideanloss_conf = 50;
  optional int32 partition_dim = 60 [default = -1]; optional int32 partition_id = 90 [default = 0];
  optional int32 num_partitions = 91 [default = 1]; extensions 101 to 200; }
message ConvolutionProto { required int32 num_filters = 1; required int32 kernel = 2;
  optional int32 pad = 30 [default = 0]; optional int32 stride = 31 [default = 1];
  optional bool bias_term = 32 [default = true]; }
message PoolingProto { required int32 kernel = 1; optional PoolMethod pool = 30 [default = MAX];
  optional uint32 pad = 31 [default = 0]; optional uint32 stride = 32 [default = 1]; }
message ConcateProto { required int32 concate_dim = 1; }
message SliceProto { required int32 slice_dim = 1; }
message EuclideanLossProto { }
enum LayerType {
  kConvolution = 1; kConcate = 2; kShardData = 3; kDropout = 4; kInnerProduct = 5; kLRN = 6;
  kMnist = 7; kPooling = 8; kReLU = 9; kRGBImage = 10; kSoftmaxLoss = 11; kSlice = 12; kSplit = 13;
  kSTanh = 14; kBridgeSrc = 15; kBridgeDst = 16; kLMDBData = 17; kLabel = 18; kPrefetch = 19;
  kRBMVis = 23; kRBMHid = 24; kEuclideanLoss = 25; kSigmoid = 26; kCConvolution = 27; kCPooling = 28;
  kUserLayer = 102; }
enum Phase { kUnknown = 0; kTrain = 1; kVal = 2; kTest = 4; kPositive = 8; kNegative = 16;
             kForward = 32; kBackward = 64; kLoss = 128; }
enum AlgType { kBP = 1; kCD = 2; kUserAlg = 104; }
enum UpdaterType { kSGD = 1; kAdaGrad = 2; kRMSProp = 3; kNesterov = 4; kUserUpdater = 105; }
"""

SCHEMA_V02 = _JOB % {"R": "optional", "GPU": "repeated int32 gpu = 18;"} + _CLUSTER % "optional" \
    + _COMMON_JOB_MSGS + """
message NetProto { repeated LayerProto layer = 1; optional int32 partition_dim = 20 [default = 0];
  repeated LayerGroupProto layer_group = 21; optional int32 unroll_len = 22 [default = 1]; }
message LayerGroupProto { repeated string layer = 1; }
message UpdaterProto {
  optional UpdaterType type = 1 [default = kUserUpdater]; optional string user_type = 2;
  optional RMSPropProto rmsprop_conf = 3; optional AdaDeltaProto adadelta_conf = 4;
  optional AdamProto adam_conf = 5; optional AdamMaxProto adammax_conf = 6;
  optional LRGenProto learning_rate = 11;
  optional float momentum = 31 [default = 0]; optional float weight_decay = 32 [default = 0];
  optional float delta = 35 [default = 0.00000001];
  optional float clip_low = 36 [default = 0]; optional float clip_high = 37 [default = 0];
  extensions 101 to 200; }
message AdaDeltaProto { required float rho = 1 [default = 0.9]; }
message AdamProto { required float beta1 = 1 [default = 0.9]; required float beta2 = 2 [default = 0.999]; }
message AdamMaxProto { required float beta1 = 1 [default = 0.9]; required float beta2 = 2 [default = 0.999]; }
message LayerProto {
  required string name = 1; repeated string srclayers = 3; repeated ParamProto param = 12;
  repeated Phase exclude = 15; repeated Phase include = 14;
  optional LayerType type = 20 [default = kUserLayer]; optional string user_type = 21;
  optional bool share_src_blobs = 22 [default = false];
  optional int32 unroll_len = 23 [default = 1]; optional int32 unroll_index = 24 [default = 0];
  repeated UnrollConnType unroll_conn_type = 25; repeated int32 shift = 26;
  optional int32 partition_dim = 60 [default = -1]; optional int32 partition_id = 90 [default = 0];
  optional int32 num_partitions = 91 [default = 1];
  optional StoreProto store_conf = 100; optional PrefetchProto prefetch_conf = 102;
  optional DataProto lmdbdata_conf = 190; optional MnistProto mnist_conf = 192;
  optional RGBImageProto rgbimage_conf = 193; optional DataProto sharddata_conf = 194;
  optional CharRNNProto char_rnn_conf = 195; optional OnehotProto onehot_conf = 196;
  optional ActivationProto activation_conf = 200; optional ConvolutionProto convolution_conf = 201;
  optional DropoutProto dropout_conf = 203; optional DummyProto dummy_conf = 204;
  optional InnerProductProto innerproduct_conf = 205; optional LRNProto lrn_conf = 206;
  optional PoolingProto pooling_conf = 207; optional RBMProto rbm_conf = 209;
  optional ReLUProto relu_conf = 211; optional SoftmaxProto softmax_conf = 214;
  optional GRUProto gru_conf = 215; optional EmbeddingProto embedding_conf = 216;
  optional SoftmaxLossProto softmaxloss_conf = 301; optional ArgSortProto argsort_conf = 401;
  optional ConcateProto concate_conf = 502; optional SliceProto slice_conf = 503;
  optional SplitProto split_conf = 504; optional RNNDummyProto rnn_dummy_conf = 505;
  extensions 1001 to 1100; }
message StoreProto {
  optional string backend = 1; optional string path = 2; optional string separator = 3 [default = ","];
  optional string mean_file = 4; optional string std_file = 5; optional float mean_value = 6;
  optional float std_value = 7; optional int32 batchsize = 8 [default = 1]; repeated int32 shape = 9;
  optional bool encoded = 10 [default = false]; optional int32 random_skip = 11 [default = 0];
  optional bool has_label = 12 [default = true]; }
message CharRNNProto { optional string path = 1; optional string vocab_path = 2;
  optional int32 unroll_len = 3 [default = 50]; optional int32 batchsize = 4 [default = 1]; }
message EmbeddingProto { optional int32 vocab_size = 1 [default = 0]; optional int32 feature_dim = 2 [default = 100]; }
message OnehotProto { optional int32 vocab_size = 1 [default = 0]; }
message ActivationProto { optional ActivationType type = 1 [default = RELU]; }
message ArgSortProto { optional int32 topk = 1 [default = 1]; }
message ConcateProto { optional int32 concate_dim = 1 [default = 0]; optional int32 num_concates = 2 [default = 1]; }
message SliceProto { optional int32 slice_dim = 1 [default = 0]; optional int32 num_slices = 2 [default = 1]; }
message ConvolutionProto {
  optional int32 num_filters = 1; optional int32 kernel = 2 [default = 3];
  optional int32 pad = 30 [default = 0]; optional int32 stride = 31 [default = 1];
  optional int32 kernel_x = 41 [default = 3]; optional int32 kernel_y = 42 [default = 3];
  optional int32 pad_x = 44 [default = 0]; optional int32 pad_y = 45 [default = 0];
  optional int32 stride_x = 47 [default = 1]; optional int32 stride_y = 48 [default = 1];
  optional int32 workspace_byte_limit = 50 [default = 512]; }
message PoolingProto {
  optional int32 kernel = 1 [default = 3]; optional PoolMethod pool = 30 [default = MAX];
  optional uint32 pad = 31 [default = 0]; optional uint32 stride = 32 [default = 2];
  optional int32 kernel_x = 41 [default = 3]; optional int32 kernel_y = 42 [default = 3];
  optional int32 pad_x = 44 [default = 0]; optional int32 pad_y = 45 [default = 0];
  optional int32 stride_x = 47 [default = 2]; optional int32 stride_y = 48 [default = 2]; }
message DummyProto { optional bool input = 1 [default = false]; optional bool output = 2 [default = false];
  repeated int32 shape = 3; }
message RNNDummyProto { optional string dynamic_srclayer = 1; repeated int32 shape = 2;
  optional bool integer = 3 [default = false]; optional float low = 4 [default = 0];
  optional float high = 5 [default = 0]; }
message GRUProto { required int32 dim_hidden = 1; optional bool bias_term = 2 [default = true]; }
message SoftmaxProto { optional int32 num_softmax_per_instance = 1 [default = 1]; }
enum ActivationType { RELU = 1; SIGMOID = 2; TANH = 3; STANH = 4; }
enum LayerType {
  kCSVInput = 100; kImagePreprocess = 101; kPrefetch = 102; kRecordInput = 103;
  kLMDBData = 190; kLabel = 191; kMnist = 192; kRGBImage = 193; kShardData = 194; kCharRNN = 195;
  kRNNLabel = 196; kOneHot = 197;
  kConvolution = 201; kCConvolution = 202; kDropout = 203; kDummy = 204; kInnerProduct = 205;
  kLRN = 206; kPooling = 207; kCPooling = 208; kRBMHid = 209; kRBMVis = 210; kReLU = 211;
  kSTanh = 212; kSigmoid = 213; kSoftmax = 214; kGRU = 215; kEmbedding = 216;
  kCudnnConv = 250; kCudnnPool = 251; kCudnnLRN = 252; kCudnnSoftmax = 253; kCudnnActivation = 254;
  kEuclideanLoss = 300; kSoftmaxLoss = 301; kCudnnSoftmaxLoss = 350;
  kAccuracy = 400; kArgSort = 401; kCSVOutput = 402; kRecordOutput = 403; kCharRNNOutput = 404;
  kBridgeDst = 500; kBridgeSrc = 501; kConcate = 502; kSlice = 503; kSplit = 504; kRNNDummy = 505;
  kUserLayer = 600; }
enum Phase { kUnknown = 0; kTrain = 1; kVal = 2; kTest = 4; kPositive = 8; kNegative = 16;
             kForward = 32; kBackward = 64; kLoss = 128; kDeploy = 256; kAggGrad = 512; }
enum AlgType { kBP = 1; kCD = 2; kBPTT = 3; kUserAlg = 104; }
enum UpdaterType { kSGD = 1; kAdaGrad = 2; kRMSProp = 3; kNesterov = 4; kAdaDelta = 5; kAdam = 6;
                   kAdamMax = 7; kUserUpdater = 105; }
enum UnrollConnType { kUnrollOneToOne = 1; kUnrollOneToAll = 2; kUnrollFirstToLast = 3; kUnrollCustomized = 4; }
"""


def _patch(text: str, *pairs) -> str:
    for old, new in pairs:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


# v0.3 = v0.2 with these changes (spec 2.4, 2.5, 3.1): bm_conf and kActivation/kBM/kCudnnBM added,
# prefetching removed, store_conf.batchsize repeated, store_conf.prefetching added.
SCHEMA_V03 = _patch(
    SCHEMA_V02,
    ("optional PrefetchProto prefetch_conf = 102;", "optional BMProto bm_conf = 217;"),
    ("kPrefetch = 102; ", ""),
    ("kEmbedding = 216;", "kEmbedding = 216; kActivation = 217; kBM = 218;"),
    ("kCudnnActivation = 254;", "kCudnnActivation = 254; kCudnnBM = 255;"),
    ("optional int32 batchsize = 8 [default = 1];", "repeated int32 batchsize = 8;"),
    ("optional bool has_label = 12 [default = true]; }",
     "optional bool has_label = 12 [default = true]; optional bool prefetching = 13 [default = false]; }"),
) + "\nmessage BMProto { }\n"

# The dev branch's job.proto is not available to netc; it is modelled as v0.3 plus the two fields
# its corpus files use (spec section 12).
SCHEMA_DEV = _patch(
    SCHEMA_V03,
    ("optional bool prefetching = 13 [default = false]; }",
     "optional bool prefetching = 13 [default = false]; optional int32 ratio = 14; }"),
    ("optional int32 poll_time = 81 [default = 100]; }",
     "optional int32 poll_time = 81 [default = 100]; optional int32 ngpu_per_group = 82; }"),
)

_SCHEMA_TEXT = {"0.1": SCHEMA_V01, "0.2": SCHEMA_V02, "0.3": SCHEMA_V03, "dev": SCHEMA_DEV}


# ------------------------------------------------------------------------------------------
# Schema objects and the .proto reader (used for the tables above and for user extension files
# such as examples/rnnlm/rnnlm.proto)

_SCALAR_KIND = {"double": "float", "float": "float", "int32": "int", "int64": "int", "uint32": "int",
                "uint64": "int", "sint32": "int", "sint64": "int", "fixed32": "int", "fixed64": "int",
                "sfixed32": "int", "sfixed64": "int", "bool": "bool", "string": "string", "bytes": "string"}
INT_RANGE = {"int32": (-2**31, 2**31 - 1), "sint32": (-2**31, 2**31 - 1), "sfixed32": (-2**31, 2**31 - 1),
              "uint32": (0, 2**32 - 1), "fixed32": (0, 2**32 - 1), "int64": (-2**63, 2**63 - 1),
              "sint64": (-2**63, 2**63 - 1), "sfixed64": (-2**63, 2**63 - 1), "uint64": (0, 2**64 - 1),
              "fixed64": (0, 2**64 - 1)}


class FieldSpec:
    __slots__ = ("name", "number", "label", "type_name", "kind", "type", "default", "loc", "full_name")

    def __init__(self, name, number, label, type_name, loc, full_name=None):
        self.name, self.number, self.label, self.type_name, self.loc = name, number, label, type_name, loc
        self.kind = self.type = self.default = None
        self.full_name = full_name or name

    @property
    def repeated(self):
        return self.label == "repeated"

    def default_value(self):
        if self.label == "repeated":
            return []
        if self.default is not None:
            return self.default
        if self.kind == "message":
            return Msg(self.type, None)
        if self.kind == "enum":
            return self.type.first
        return {"int": 0, "float": 0.0, "bool": False, "string": ""}[self.kind]

    def describe(self):
        t = self.type.name if self.kind in ("message", "enum") else self.type_name
        return f"{self.label} {t}"


class MsgSpec:
    __slots__ = ("name", "short", "fields", "ext_ranges", "loc")

    def __init__(self, name, loc):
        self.name, self.loc = name, loc
        self.short = name.rsplit(".", 1)[-1]
        self.fields: dict[str, FieldSpec] = {}
        self.ext_ranges: list[tuple[int, int]] = []


class EnumSpec:
    __slots__ = ("name", "short", "values", "numbers", "first", "loc")

    def __init__(self, name, loc):
        self.name, self.loc = name, loc
        self.short = name.rsplit(".", 1)[-1]
        self.values: dict[str, int] = {}
        self.numbers: dict[int, str] = {}
        self.first = None


class Schema:
    """Messages and enums by full name ('singa.LayerProto'), plus registered extensions:
    extensions[extendee full name][extension full name] = FieldSpec."""

    def __init__(self, version):
        self.version = version
        self.messages: dict[str, MsgSpec] = {}
        self.enums: dict[str, EnumSpec] = {}
        self.extensions: dict[str, dict[str, FieldSpec]] = {}
        self.loaded: list[str] = []

    def copy(self):
        s = Schema(self.version)
        s.messages, s.enums = dict(self.messages), dict(self.enums)
        s.extensions = {k: dict(v) for k, v in self.extensions.items()}
        s.loaded = list(self.loaded)
        return s

    def msg(self, short):
        return self.messages["singa." + short]

    def enum(self, short):
        return self.enums["singa." + short]


_SCHEMAS: dict[str, Schema] = {}


def load_schema(version: str) -> Schema:
    """The built-in schema of a version (cached; copy() it before adding extensions)."""
    s = _SCHEMAS.get(version)
    if s is None:
        s = Schema(version)
        _ProtoReader(_SCHEMA_TEXT[version], f"<singa {version} job.proto>", s, package="singa").read()
        _SCHEMAS[version] = s
    return s


class _ProtoReader:
    """proto2 .proto files, enough for SINGA's schemas and users' extension files: package,
    import (ignored: SINGA's own protos are built in), option (skipped), message (nested),
    enum, extend, extensions, reserved, oneof, service (skipped). Raises NetcError."""

    MAX_DEPTH = 64

    def __init__(self, text, file, schema: Schema, package=None):
        SOURCES.add(file, text)
        self.toks = pt.tokenize(text, file, proto=True)
        self.i, self.file, self.schema = 0, file, schema
        self.package = package or ""
        self.fields = []   # (FieldSpec, scope, default token(s))
        self.extends = []  # (extendee name, scope, FieldSpec, default)
        self.declared = []

    # -- token helpers
    def peek(self, k=0):
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def loc(self, t=None):
        t = t or self.peek()
        return Loc(self.file, t.line, t.col)

    def err(self, msg, t=None):
        t = t or self.peek()
        found = "end of file" if t.kind == "eof" else f"'{t.text}'"
        raise NetcError(msg.replace("{found}", found), self.loc(t))

    def next(self):
        t = self.toks[self.i]
        if t.kind != "eof":
            self.i += 1
        return t

    def accept(self, text):
        t = self.peek()
        if t.kind in ("sym", "ident") and t.text == text:
            self.i += 1
            return True
        return False

    def expect(self, text, what=None):
        if not self.accept(text):
            self.err(f"expected '{text}'{' ' + what if what else ''}, found {{found}}")

    def ident(self, what="a name"):
        t = self.next()
        if t.kind != "ident":
            self.i -= 1 if t.kind != "eof" else 0
            self.err(f"expected {what}, found {{found}}", t)
        return t.text

    def dotted(self, what="a type name"):
        parts = []
        if self.accept("."):
            parts.append("")
        parts.append(self.ident(what))
        while self.accept("."):
            parts.append(self.ident(what))
        return ".".join(parts)

    def integer(self):
        neg = self.accept("-")
        t = self.next()
        if t.kind == "ident" and t.text == "max":
            return 2**29 - 1
        if t.kind != "number":
            self.err("expected an integer, found {found}", t)
        kind, v = pt.parse_number(t.text)
        if kind != "int":
            self.err("expected an integer, found {found}", t)
        return -v if neg else v

    def skip_statement(self):
        depth = 0
        while True:
            t = self.next()
            if t.kind == "eof":
                self.err("unexpected end of file", t)
            if t.kind == "sym" and t.text in "{(":
                depth += 1
            elif t.kind == "sym" and t.text in "})":
                depth -= 1
                if depth == 0 and t.text == "}":
                    return
            elif t.kind == "sym" and t.text == ";" and depth == 0:
                return

    # -- grammar
    def read(self):
        while self.peek().kind != "eof":
            t = self.peek()
            if self.accept(";"):
                continue
            if t.kind != "ident":
                self.err("expected a declaration (message, enum, extend, import, package, option), found {found}")
            kw = t.text
            if kw == "syntax":
                self.next()
                self.expect("=")
                s = self.next()
                if s.kind != "string" or pt.unescape(s.text, self.loc(s)) not in ("proto2", "proto3"):
                    self.err("expected \"proto2\"", s)
                self.expect(";")
            elif kw == "package":
                self.next()
                self.package = self.dotted("a package name")
                self.expect(";")
            elif kw == "import":
                self.next()
                if self.peek().kind == "ident" and self.peek().text in ("public", "weak"):
                    self.next()
                if self.next().kind != "string":
                    self.err("expected a file name string after 'import'", self.toks[self.i - 1])
                self.expect(";")
            elif kw == "option":
                self.skip_statement()
            elif kw == "message":
                self.message(self.package, 0)
            elif kw == "enum":
                self.enum(self.package)
            elif kw == "extend":
                self.extend(self.package, 0)
            elif kw == "service":
                self.next()
                self.ident()
                self.skip_statement()
            else:
                self.err("expected a declaration (message, enum, extend, import, package, option), found {found}")
        self.resolve()
        return self

    def _full(self, scope, name):
        return f"{scope}.{name}" if scope else name

    def message(self, scope, depth):
        if depth > self.MAX_DEPTH:
            self.err("messages nested too deeply")
        self.expect("message")
        nt = self.peek()
        name = self.ident("a message name")
        full = self._full(scope, name)
        if full in self.schema.messages or full in self.schema.enums:
            self.err(f"'{full}' is already defined", nt)
        spec = MsgSpec(full, self.loc(nt))
        self.schema.messages[full] = spec
        self.declared.append(full)
        self.expect("{", "to open the message body")
        while not self.accept("}"):
            t = self.peek()
            if t.kind == "eof":
                self.err(f"unexpected end of file: message '{name}' is not closed")
            if self.accept(";"):
                continue
            kw = t.text if t.kind == "ident" else ""
            if kw == "message":
                self.message(full, depth + 1)
            elif kw == "enum":
                self.enum(full)
            elif kw == "extend":
                self.extend(full, depth + 1)
            elif kw == "extensions":
                self.next()
                while True:
                    lo = self.integer()
                    hi = self.integer() if self.accept("to") else lo
                    spec.ext_ranges.append((lo, hi))
                    if not self.accept(","):
                        break
                if self.peek().text == "[":
                    self.skip_statement()
                else:
                    self.expect(";")
            elif kw in ("reserved", "option"):
                self.skip_statement()
            elif kw == "oneof":
                self.next()
                self.ident("a oneof name")
                self.expect("{")
                while not self.accept("}"):
                    if self.peek().kind == "eof":
                        self.err("unexpected end of file in oneof")
                    if self.accept(";"):
                        continue
                    self.field(spec, full, "optional")
            else:
                self.field(spec, full, None)

    def field(self, spec, scope, label, extendee=None):
        t = self.peek()
        if label is None:
            if t.kind == "ident" and t.text in ("optional", "required", "repeated"):
                label = self.next().text
            elif t.kind == "ident" and t.text == "map":
                self.err("map fields are not supported in SINGA schemas")
            else:
                self.err("expected 'optional', 'required' or 'repeated' (proto2 field), found {found}")
        tt = self.peek()
        if tt.kind == "ident" and tt.text == "group":
            self.err("proto2 groups are not supported")
        type_name = self.dotted("a field type")
        nt = self.peek()
        name = self.ident("a field name")
        self.expect("=")
        number = self.integer()
        default = None
        if self.accept("["):
            while True:
                if self.accept("("):
                    self.dotted("an option name")
                    self.expect(")")
                    while self.accept("."):
                        self.ident()
                    oname = None
                else:
                    oname = self.ident("an option name")
                self.expect("=")
                neg = self.accept("-")
                v = self.next()
                if v.kind not in ("ident", "number", "string"):
                    self.err("expected an option value, found {found}", v)
                if oname == "default":
                    default = (neg, v)
                if not self.accept(","):
                    break
            self.expect("]")
        self.expect(";")
        fs = FieldSpec(name, number, label, type_name, self.loc(nt))
        if extendee is None:
            if name in spec.fields:
                self.err(f"field '{name}' is already defined in '{spec.name}'", nt)
            if number in {f.number for f in spec.fields.values()}:
                self.err(f"field number {number} is used twice in '{spec.name}'", nt)
            spec.fields[name] = fs
            self.fields.append((fs, scope, default))
        else:
            fs.full_name = self._full(scope, name)
            self.extends.append((extendee, scope, fs, default))
            self.fields.append((fs, scope, default))

    def enum(self, scope):
        self.expect("enum")
        nt = self.peek()
        name = self.ident("an enum name")
        full = self._full(scope, name)
        if full in self.schema.messages or full in self.schema.enums:
            self.err(f"'{full}' is already defined", nt)
        e = EnumSpec(full, self.loc(nt))
        self.schema.enums[full] = e
        self.declared.append(full)
        self.expect("{", "to open the enum body")
        while not self.accept("}"):
            if self.peek().kind == "eof":
                self.err(f"unexpected end of file: enum '{name}' is not closed")
            if self.accept(";"):
                continue
            if self.peek().kind == "ident" and self.peek().text in ("option", "reserved"):
                self.skip_statement()
                continue
            vt = self.peek()
            v = self.ident("an enum value name")
            self.expect("=")
            n = self.integer()
            if self.accept("["):
                while not self.accept("]"):
                    if self.next().kind == "eof":
                        self.err("unexpected end of file")
            self.expect(";")
            if v in e.values:
                self.err(f"enum value '{v}' is defined twice", vt)
            e.values[v] = n
            e.numbers.setdefault(n, v)
            if e.first is None:
                e.first = v

    def extend(self, scope, depth):
        self.expect("extend")
        et = self.peek()
        extendee = self.dotted("a message name")
        self.expect("{")
        while not self.accept("}"):
            if self.peek().kind == "eof":
                self.err("unexpected end of file: 'extend' block is not closed")
            if self.accept(";"):
                continue
            self.field(None, scope, None, extendee=(extendee, self.loc(et)))

    def lookup(self, name, scope, kinds=("message", "enum")):
        s = self.schema
        if name.startswith("."):
            cands = [name[1:]]
        else:
            parts = scope.split(".") if scope else []
            cands = [".".join(parts[:k] + [name]) for k in range(len(parts), -1, -1)]
        for c in cands:
            if "message" in kinds and c in s.messages:
                return "message", s.messages[c]
            if "enum" in kinds and c in s.enums:
                return "enum", s.enums[c]
        return None, None

    def resolve(self):
        for fs, scope, default in self.fields:
            if fs.type_name in _SCALAR_KIND:
                fs.kind, fs.type = _SCALAR_KIND[fs.type_name], fs.type_name
            else:
                kind, t = self.lookup(fs.type_name, scope)
                if t is None:
                    raise NetcError(f"unknown type '{fs.type_name}' of field '{fs.name}'", fs.loc)
                fs.kind, fs.type = kind, t
            if default is not None:
                fs.default = self._default(fs, *default)
        for (extendee, eloc), scope, fs, default in self.extends:
            kind, target = self.lookup(extendee, scope, ("message",))
            if target is None:
                if extendee.startswith("singa.") or extendee.startswith(".singa."):
                    continue  # a SINGA message outside the job schema netc models (e.g. singa.Record)
                raise NetcError(f"unknown message '{extendee}' in 'extend'", eloc)
            if not any(lo <= fs.number <= hi for lo, hi in target.ext_ranges):
                ranges = ", ".join(f"{lo} to {hi}" for lo, hi in target.ext_ranges) or "none"
                d = Diagnostic("error", f"extension '{fs.name}' = {fs.number} is outside the extension "
                               f"range of {target.name} in {V_LABEL.get(self.schema.version, self.schema.version)} "
                               f"(extensions {ranges}); protoc rejects this file", fs.loc)
                raise NetcError(d)
            exts = self.schema.extensions.setdefault(target.name, {})
            if fs.full_name in exts:
                raise NetcError(f"extension '{fs.full_name}' is already defined", fs.loc)
            for other in exts.values():
                if other.number == fs.number:
                    raise NetcError(f"extension number {fs.number} of {target.name} is used twice "
                                    f"('{other.full_name}' and '{fs.full_name}')", fs.loc)
            exts[fs.full_name] = fs

    def _default(self, fs, neg, tok):
        loc = Loc(self.file, tok.line, tok.col)
        text = tok.text
        if fs.kind == "int":
            if tok.kind != "number" or pt.parse_number(text)[0] != "int":
                raise NetcError(f"default of '{fs.name}' must be an integer", loc)
            v = pt.parse_number(text)[1]
            return -v if neg else v
        if fs.kind == "float":
            if tok.kind == "number":
                v = float(pt.parse_number(text)[1])
            elif tok.kind == "ident" and text.lower() in ("inf", "infinity", "nan"):
                v = float(text.lower().replace("infinity", "inf"))
            else:
                raise NetcError(f"default of '{fs.name}' must be a number", loc)
            return -v if neg else v
        if fs.kind == "bool":
            if tok.kind == "ident" and text in ("true", "false"):
                return text == "true"
            raise NetcError(f"default of '{fs.name}' must be true or false", loc)
        if fs.kind == "string":
            if tok.kind != "string":
                raise NetcError(f"default of '{fs.name}' must be a string", loc)
            return pt.unescape(tok.text, loc)
        if fs.kind == "enum":
            if tok.kind != "ident" or text not in fs.type.values:
                raise NetcError(f"default of '{fs.name}' is not a value of {fs.type.name}", loc)
            return text
        raise NetcError(f"message field '{fs.name}' cannot have a default", loc)


def load_extension_proto(path_or_text, schema: Schema, file: str | None = None) -> list[str]:
    """Read a user .proto (e.g. rnnlm.proto) into `schema`; returns the extension full names it
    registered. Parse and compile errors are NetcErrors located in the .proto file."""
    if file is None and isinstance(path_or_text, (str, os.PathLike)) and looks_like_path(path_or_text):
        file = str(path_or_text)
        text = read_conf_text(file)
    else:
        text, file = str(path_or_text), file or "<proto>"
    before = {k: set(v) for k, v in schema.extensions.items()}
    _ProtoReader(text, file, schema).read()
    schema.loaded.append(file)
    return [n for k, v in schema.extensions.items() for n in v if n not in before.get(k, ())]


def looks_like_path(s) -> bool:
    if isinstance(s, os.PathLike):
        return True
    return "\n" not in s and "{" not in s and len(s) < 4096 and os.path.isfile(s)


def read_conf_text(path: str) -> str:
    return read_source(path)


# ------------------------------------------------------------------------------------------
# Typed messages

MISSING = object()


class Msg:
    """A message read against a schema. get() returns the value or the schema default (an
    empty Msg for unset message fields, [] for repeated fields, None for a field the schema of
    this version does not have); has() tells whether the text set it; at() is its Loc."""

    __slots__ = ("spec", "vals", "locs", "vlocs", "loc")

    def __init__(self, spec: MsgSpec, loc: Loc | None):
        self.spec, self.loc = spec, loc
        self.vals: dict = {}
        self.locs: dict = {}   # where each field's name is written (a list for repeated fields)
        self.vlocs: dict = {}  # where each scalar value is written (a list for repeated fields)

    def has(self, name) -> bool:
        return name in self.vals

    def get(self, name):
        v = self.vals.get(name, MISSING)
        if v is not MISSING:
            return v
        fs = self.spec.fields.get(name)
        return None if fs is None else fs.default_value()

    def at(self, name) -> Loc | None:
        loc = self.locs.get(name)
        if isinstance(loc, list):
            return loc[0] if loc else None
        return loc if loc is not None else self.loc

    def locs_of(self, name) -> list:
        loc = self.locs.get(name)
        return loc if isinstance(loc, list) else ([loc] if loc is not None else [])

    def vat(self, name) -> Loc | None:
        """Where the (first) value of a scalar field is written; else like at()."""
        loc = self.vlocs.get(name)
        if isinstance(loc, list):
            return loc[0] if loc else self.at(name)
        return loc if loc is not None else self.at(name)

    def vlocs_of(self, name) -> list:
        loc = self.vlocs.get(name)
        return loc if isinstance(loc, list) else ([loc] if loc is not None else [])

    def extensions(self):
        """{extension full name: value} for `[ext] ...` fields set in the text."""
        return {k[1:-1]: v for k, v in self.vals.items() if k.startswith("[")}

    def to_dict(self, defaults: bool = False) -> dict:
        """Plain Python: {field: value}; sub-messages as dicts, repeated fields as lists,
        extensions as '[name]' keys. With defaults=True unset scalar fields get their
        default (unset message fields are left out)."""
        out = {}
        if defaults:
            for name, fs in self.spec.fields.items():
                if name not in self.vals and fs.kind != "message":
                    out[name] = fs.default_value()
        for k, v in self.vals.items():
            if isinstance(v, Msg):
                out[k] = v.to_dict(defaults)
            elif isinstance(v, list):
                out[k] = [x.to_dict(defaults) if isinstance(x, Msg) else x for x in v]
            else:
                out[k] = v
        return out

    def __repr__(self):
        return f"Msg({self.spec.short}, {self.to_dict()})"


# Targeted hints for names people actually write (spec 1.1, 9, 11/B18, appendix A).
