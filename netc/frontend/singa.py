"""SINGA (Apache SINGA v0.1 - v0.3) job.conf importer, front half: schema-aware reading of the
protobuf text (prototext.py does the syntax) and SINGA's own graph construction, per phase and
partition count, exactly as /work/shared/spec/singa-format.md sections 4-8 describe it.

    net = build_singa("examples/cifar10/job.conf", phase="train")      # -> SingaNet
    for n in net.nodes: print(n.name, n.type, n.srcs, n.shape, [p.shape for p in n.params])

The result is plain data (SingaNet / SingaNode / SingaParam): nodes in SINGA's execution order
(Graph::Sort), each with SINGA's node name, layer type, sources, partition id, output shape,
parameter shapes and names, the layer's configuration values and the source location. Mapping
it onto netc's IR is a separate step.

Versions ("modes"):  "0.1" (tag v0.1.0), "0.2" (tag v0.2.0), "0.3" (tag v0.3.0-rc3), "dev" (the
2016 pull-request branch: v0.3 schema plus store_conf.ratio and cluster.ngpu_per_group). The
v0.2/v0.3/dev graph code is one mode. "pre0.1" (the May-July 2015 ModelProto dialect) is
recognized and rejected with a diagnostic that says why. detect_version() documents how the mode
is chosen from a file's content when `version` is not given.

Errors are NetcErrors carrying Diagnostics with file:line:col (errors that are independent are
collected and reported together); warnings go to SingaNet.diagnostics (and to `diag` if given).
Every SINGA misbehaviour listed in the spec's section 11 (B1-B18) that can be seen while reading
or building is reported: see the B-numbers in the comments below.
"""
from __future__ import annotations

import math
import os
from collections import deque
from dataclasses import dataclass, field

from ..diagnostics import SOURCES, Diagnostic, DiagnosticEngine, Loc, NetcError, did_you_mean
from . import prototext as pt
from .source import read_source

__all__ = ["build_singa", "build_all", "read_job", "detect_version", "SingaJob", "SingaNet", "SingaNode",
           "SingaParam", "UserLayerRule", "RNNLM_PLUGIN", "VERSIONS", "load_schema", "load_extension_proto"]

VERSIONS = ("0.1", "0.2", "0.3", "dev")
_V_LABEL = {"0.1": "SINGA v0.1", "0.2": "SINGA v0.2", "0.3": "SINGA v0.3", "dev": "the 2016 SINGA dev branch",
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
_INT_RANGE = {"int32": (-2**31, 2**31 - 1), "sint32": (-2**31, 2**31 - 1), "sfixed32": (-2**31, 2**31 - 1),
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
                               f"range of {target.name} in {_V_LABEL.get(self.schema.version, self.schema.version)} "
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
    if file is None and isinstance(path_or_text, (str, os.PathLike)) and _looks_like_path(path_or_text):
        file = str(path_or_text)
        text = _read_text(file)
    else:
        text, file = str(path_or_text), file or "<proto>"
    before = {k: set(v) for k, v in schema.extensions.items()}
    _ProtoReader(text, file, schema).read()
    schema.loaded.append(file)
    return [n for k, v in schema.extensions.items() for n in v if n not in before.get(k, ())]


def _looks_like_path(s) -> bool:
    if isinstance(s, os.PathLike):
        return True
    return "\n" not in s and "{" not in s and len(s) < 4096 and os.path.isfile(s)


def _read_text(path: str) -> str:
    return read_source(path)


# ------------------------------------------------------------------------------------------
# Typed messages

_MISSING = object()


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
        v = self.vals.get(name, _MISSING)
        if v is not _MISSING:
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
_FIELD_HINTS = {
    ("JobProto", "net"): "did you mean 'neuralnet'? (`net { }` appears only in the pseudo-configs of "
                         "SINGA's documentation)",
    ("NetProto", "net"): "did you mean 'neuralnet'? (and it belongs at the top level of the job)",
    ("LayerProto", "srclayer"): "did you mean 'srclayers'? (the field is plural and repeated)",
    ("LayerProto", "location"): "(documented in SINGA's docs but not present in any SINGA release)",
    ("LayerProto", "locationid"): "(`locationid` existed only in pre-0.1 SINGA, May-July 2015; no release has it)",
    ("JobProto", "model"): "(the `model { }` wrapper is the July-2015 pre-0.1 JobProto; from SINGA v0.1 on "
                           "its fields -- name, train_steps, updater, neuralnet, ... -- are written at the top level)",
    ("LayerProto", "partition_type"): "(pre-0.1 SINGA; releases use 'partition_dim')",
    ("NetProto", "partition_type"): "(pre-0.1 SINGA; releases use 'partition_dim')",
    ("ParamProto", "init_method"): "(pre-0.1 SINGA; releases write `init { type: ... }`)",
    ("ParamProto", "learning_rate_multiplier"): "(pre-0.1 SINGA; releases use 'lr_scale')",
    ("ParamProto", "weight_decay_multiplier"): "(pre-0.1 SINGA; releases use 'wd_scale')",
    ("UpdaterProto", "base_learning_rate"): "(the pre-0.1 ModelProto updater; releases write "
                                            "`learning_rate { base_lr: ... }`)",
    ("UpdaterProto", "learning_rate_change_method"): "(the pre-0.1 ModelProto updater; releases write "
                                                     "`learning_rate { type: ... }`)",
    ("UpdaterProto", "base_lr"): "(pre-0.1 SINGA; releases write `learning_rate { base_lr: ... }`)",
    ("UpdaterProto", "lr_change"): "(pre-0.1 SINGA; releases write `learning_rate { type: ... }`)",
    ("JobProto", "test_frequency"): "(pre-0.1 SINGA; releases use 'test_freq')",
    ("JobProto", "display_frequency"): "(pre-0.1 SINGA; releases use 'disp_freq')",
    ("JobProto", "alg"): "(pre-0.1 SINGA; releases write `train_one_batch { alg: ... }`)",
}
_PARAM_TO_CONF = {"inner_product_param": "innerproduct_conf", "data_param": "sharddata_conf",
                  "softmaxloss_param": "softmaxloss_conf", "tanh_param": "(kSTanh has no conf)"}
_ENUM_HINTS = {
    ("LayerType", "kData"): "'kData' is not a LayerType (it exists only as a user_type string of the rnnlm "
                            "example); data layers are kRecordInput (v0.2+) or kShardData",
    ("LayerType", "kImage"): "'kImage' is not a LayerType (SINGA's documentation pseudo-configs use it); "
                             "image parsing is kRGBImage / kImagePreprocess",
    ("LayerType", "kHidden"): "'kHidden' is not a LayerType (it exists only as a user_type string of the rnnlm "
                              "example)",
    ("LayerType", "kVisLayer"): "did you mean 'kRBMVis'?",
    ("LayerType", "kHidLayer"): "did you mean 'kRBMHid'?",
    ("LayerType", "kTanh"): "did you mean 'kSTanh'? ('kTanh' is pre-0.1 SINGA)",
    ("LayerType", "kMnistImage"): "did you mean 'kMnist'? ('kMnistImage' is pre-0.1 SINGA)",
    ("AlgType", "kBackPropagation"): "did you mean 'kBP'? ('kBackPropagation' is pre-0.1 SINGA)",
    ("AlgType", "kContrastiveDivergence"): "did you mean 'kCD'? ('kContrastiveDivergence' is pre-0.1 SINGA)",
    ("PoolMethod", "AVE"): "did you mean 'AVG'? ('AVE' is pre-0.1 SINGA)",
}


class _Reader:
    """Converts a prototext tree into Msg objects against a Schema, collecting diagnostics."""

    MAX_DEPTH = 100

    def __init__(self, schema: Schema, version: str, file: str, ext_loader=None):
        self.schema, self.version, self.file = schema, version, file
        self.errors: list[Diagnostic] = []
        self.ext_loader = ext_loader  # callable(name, loc) -> bool (True if something new was loaded)

    def error(self, msg, loc, width=1, note=None):
        d = Diagnostic("error", msg, loc, width=width)
        if note:
            d.note(*note) if isinstance(note, tuple) else d.note(note)
        self.errors.append(d)
        return d

    def convert(self, tree: pt.Message, spec: MsgSpec, where: Loc, depth=0, fname=None) -> Msg:
        if depth > self.MAX_DEPTH:
            self.error("messages nested too deeply", where)
            return Msg(spec, where)
        m = Msg(spec, where)
        n_err = len(self.errors)
        for f in tree.fields:
            if f.ext:
                fs = self._ext_field(spec, f)
                if fs is None:
                    continue
                key = "[" + fs.full_name + "]"
            else:
                fs = spec.fields.get(f.name)
                if fs is None:
                    self._unknown_field(spec, f)
                    continue
                key = f.name
            if fs.kind == "message":
                if not f.is_message:
                    self.error(f"field '{f.name}' of {spec.short} is a message ({fs.type.short}); "
                               f"write '{f.name} {{ ... }}'", f.value.loc)
                    continue
                v = self.convert(f.value, fs.type, f.loc, depth + 1, f.name)
            else:
                if f.is_message:
                    self.error(f"field '{f.name}' of {spec.short} is a scalar ({fs.describe()}), "
                               f"not a message", f.value.loc)
                    continue
                v = self._scalar(fs, f, spec)
                if v is _MISSING:
                    continue
            if fs.repeated:
                m.vals.setdefault(key, []).append(v)
                m.locs.setdefault(key, []).append(f.loc)
                if fs.kind != "message":
                    m.vlocs.setdefault(key, []).append(f.value.loc)
            elif key in m.vals:
                self.error(f"field '{f.name}' of {spec.short} is given twice (it is not repeated)", f.loc,
                           width=len(f.name), note=("first given here", m.locs[key]))
            else:
                m.vals[key] = v
                m.locs[key] = f.loc
                if fs.kind != "message":
                    m.vlocs[key] = f.value.loc
        if len(self.errors) == n_err:  # a misspelt required field is reported once, as unknown
            what = f"'{fname}' ({spec.short})" if fname else f"the job ({spec.short})"
            for name, fs in spec.fields.items():
                if fs.label == "required" and name not in m.vals:
                    self.error(f"missing required field '{name}' in {what}", where,
                               width=len(fname) if fname else 1)
        return m

    def _unknown_field(self, spec: MsgSpec, f: pt.Field):
        hint = _FIELD_HINTS.get((spec.short, f.name))
        msg = f"unknown field '{f.name}' in {spec.short}"
        notes = []
        if hint is None and f.name.endswith("_param"):
            conf = _PARAM_TO_CONF.get(f.name, f.name[:-6] + "_conf")
            hint = f"(`*_param` is the pre-0.1 spelling, May-June 2015; releases use '{conf}')"
        if hint is None:
            cand = did_you_mean(f.name, spec.fields)
            if cand:
                hint = f"did you mean '{cand}'?"
        other = self._other_versions_with_field(spec.short, f.name)
        if other:
            notes.append(f"'{f.name}' is a field of {spec.short} in {', '.join(_V_LABEL[v] for v in other)}; "
                         f"this file is read as {_V_LABEL[self.version]} (pass version=... to change)")
            if f.name == "ratio" or f.name == "ngpu_per_group":
                notes[-1] += "; it exists only on the 2016 development branch (version='dev')"
        d = self.error(msg + (("; " if hint.startswith("did") else " ") + hint if hint else ""), f.loc,
                       width=len(f.name) + (2 if f.ext else 0))
        for n in notes:
            d.note(n)

    def _other_versions_with_field(self, short, name):
        out = []
        for v in VERSIONS:
            if v == self.version:
                continue
            spec = load_schema(v).messages.get("singa." + short)
            if spec is not None and name in spec.fields:
                out.append(v)
        return out

    def _ext_field(self, spec: MsgSpec, f: pt.Field):
        if not spec.ext_ranges:
            self.error(f"{spec.short} has no extensions, but '[{f.name}]' is given", f.loc)
            return None
        for attempt in (0, 1):
            exts = self.schema.extensions.get(spec.name, {})
            fs = exts.get(f.name) or exts.get(f.name.lstrip("."))
            if fs is not None:
                return fs
            if attempt == 0 and self.ext_loader is not None:
                try:
                    if not self.ext_loader(f):
                        break
                except NetcError as e:
                    e.diagnostics[0].note(f"loaded because of the extension '[{f.name}]' used here", f.loc)
                    raise
        loaded = ", ".join(self.schema.loaded) or "none"
        d = self.error(f"unknown extension '[{f.name}]' of {spec.short}: no loaded .proto file declares it "
                       f"(loaded: {loaded})", f.loc, width=len(f.name) + 2)
        d.note("pass the user's .proto (e.g. examples/rnnlm/rnnlm.proto) with extension_protos=[...], or "
               "put it next to the job file")
        return None

    def _scalar(self, fs: FieldSpec, f: pt.Field, spec: MsgSpec):
        sc: pt.Scalar = f.value
        kind = fs.kind
        where = f"field '{f.name}' ({fs.describe()})"
        if kind == "int":
            if sc.kind == "int":
                lo, hi = _INT_RANGE[fs.type]
                if not lo <= sc.value <= hi:
                    self.error(f"value {sc.text} is out of range for {where}", sc.loc, len(sc.text))
                    return _MISSING
                return sc.value
            self.error(f"expected an integer for {where}, found {_found(sc)}", sc.loc, len(sc.text))
            return _MISSING
        if kind == "float":
            if sc.kind in ("int", "float"):
                return float(sc.value)
            if sc.kind == "ident" and sc.value.lower() in ("inf", "infinity", "nan"):
                v = float("nan") if sc.value.lower() == "nan" else math.inf
                return -v if sc.negative else v
            self.error(f"expected a number for {where}, found {_found(sc)}", sc.loc, len(sc.text))
            return _MISSING
        if kind == "bool":
            if sc.kind == "ident" and not sc.negative and sc.value in ("true", "True", "t", "false", "False", "f"):
                return sc.value in ("true", "True", "t")
            if sc.kind == "int" and not sc.negative and sc.value in (0, 1):
                return sc.value == 1
            self.error(f"expected true or false for {where}, found {_found(sc)}", sc.loc, len(sc.text))
            return _MISSING
        if kind == "string":
            if sc.kind == "string":
                return sc.value
            self.error(f"expected a quoted string for {where}, found {_found(sc)}", sc.loc, len(sc.text))
            return _MISSING
        # enum
        e: EnumSpec = fs.type
        if sc.kind == "ident" and not sc.negative:
            if sc.value in e.values:
                return sc.value
            self._unknown_enum(e, sc, f)
            return _MISSING
        if sc.kind == "int":
            if sc.value in e.numbers:
                return e.numbers[sc.value]
            self.error(f"{sc.value} is not a value of enum {e.short} ({where})", sc.loc, len(sc.text))
            return _MISSING
        if sc.kind == "string" and e.short == "LayerType":
            d = self.error(f"expected a {e.short} identifier for {where}, found the string {sc.text}", sc.loc,
                           len(sc.text))
            d.note("quoted layer types (`type: \"kConvolution\"`) are the pre-0.1 dialect (May-June 2015); "
                   "releases write the identifier unquoted" + (f": type: {sc.value}" if sc.value in e.values else ""))
            return _MISSING
        self.error(f"expected a {e.short} value for {where}, found {_found(sc)}", sc.loc, len(sc.text))
        return _MISSING

    def _unknown_enum(self, e: EnumSpec, sc: pt.Scalar, f: pt.Field):
        hint = _ENUM_HINTS.get((e.short, sc.value))
        if hint is None:
            cand = did_you_mean(sc.value, e.values)
            hint = f"did you mean '{cand}'?" if cand else None
        msg = f"unknown {e.short} value '{sc.value}' for field '{f.name}'"
        d = self.error(msg + ("; " + hint if hint else ""), sc.loc, len(sc.text))
        other = [v for v in VERSIONS if v != self.version
                 and sc.value in getattr(load_schema(v).enums.get(e.name), "values", {})]
        if other:
            d.note(f"'{sc.value}' is a {e.short} value in {', '.join(_V_LABEL[v] for v in other)}; this file "
                   f"is read as {_V_LABEL[self.version]} (pass version=... to change)")


def _found(sc: pt.Scalar) -> str:
    kind = {"int": "the integer", "float": "the number", "string": "the string", "ident": "the identifier"}[sc.kind]
    return f"{kind} {sc.text}"


# ------------------------------------------------------------------------------------------
# Version detection

# Field names and identifiers that only some dialects have. Detection rules, in order:
#  1. pre-0.1 (ModelProto, May-July 2015) if the file quotes a layer type (`type: "kConvolution"`),
#     uses a `*_param` conf, wraps the job in `model { }`, or uses another pre-0.1-only field
#     (partition_type, locationid, init_method, learning_rate_multiplier, ...);
#  2. otherwise v0.2+ if it uses anything v0.1 does not have (`include`, store_conf, unrolling,
#     gpu, cuDNN/RNN/record layer types, ...): "dev" if it uses a dev-branch-only field
#     (store_conf.ratio, cluster.ngpu_per_group), "0.2" if it uses a v0.2-only feature (prefetch
#     inside a v0.2+ file), else "0.3" (v0.3 accepts every v0.2 file except those);
#  3. otherwise v0.1 (exclude + kShardData and parser layers, or nothing version-specific).
_PRE01_FIELDS = {"partition_type", "locationid", "partitionid", "init_method", "learning_rate_multiplier",
                 "weight_decay_multiplier", "share_param", "share_ary", "learning_rate_change_method",
                 "base_learning_rate", "display_frequency", "test_frequency", "sublayers", "model",
                 "lr_change", "datablob", "param_type", "checkpoint_frequency", "vis_step", "pcd_k"}
_V02_FIELDS = {"include", "store_conf", "unroll_len", "unroll_conn_type", "shift", "share_src_blobs", "gpu",
               "char_rnn_conf", "onehot_conf", "activation_conf", "dummy_conf", "softmax_conf", "gru_conf",
               "embedding_conf", "argsort_conf", "rnn_dummy_conf", "bm_conf", "clip_low", "clip_high",
               "kernel_x", "kernel_y", "pad_x", "pad_y", "stride_x", "stride_y", "layer_group",
               "num_concates", "num_slices", "adadelta_conf", "adam_conf", "adammax_conf"}
_V03_ONLY = {"bm_conf", "prefetching", "kActivation", "kBM", "kCudnnBM"}
_DEV_ONLY = {"ratio", "ngpu_per_group"}


def detect_version(tree: pt.Message) -> tuple[str, str]:
    """(version, reason) for a parsed job file; see the rules above."""
    v, reason, _ = _detect(tree)
    return v, reason


def _detect(tree: pt.Message):
    names: dict[str, Loc] = {}
    idents: dict[str, Loc] = {}
    quoted_type = None
    batchsize_twice = None
    stack = [(tree, "")]
    while stack:
        msg, parent = stack.pop()
        seen_bs = 0
        for f in msg.fields:
            if f.ext:  # names inside user extensions say nothing about SINGA's schema
                continue
            names.setdefault(f.name, f.loc)
            if f.is_message:
                stack.append((f.value, f.name))
            else:
                v = f.value
                if v.kind == "ident":
                    idents.setdefault(v.value, v.loc)
                elif (v.kind == "string" and f.name == "type" and parent in ("layer", "sublayers")
                      and quoted_type is None):
                    quoted_type = f.loc
                if parent == "store_conf" and f.name == "batchsize":
                    seen_bs += 1
                    if seen_bs == 2:
                        batchsize_twice = f.loc

    def why(what, loc):
        return f"{what} at line {loc.line}" if loc and loc.line else what

    if quoted_type is not None:
        return "pre0.1", why("a quoted layer type", quoted_type), quoted_type
    for n, loc in names.items():
        if n.endswith("_param") or n in _PRE01_FIELDS:
            return "pre0.1", why(f"'{n}'", loc), loc
    v2 = [(n, loc) for n, loc in names.items() if n in _V02_FIELDS]
    v2_types = load_schema("0.3").enum("LayerType").values.keys() - load_schema("0.1").enum("LayerType").values.keys()
    v2 += [(i, loc) for i, loc in idents.items() if i in v2_types or i in ("kBPTT", "kUnrollOneToAll")]
    if not v2:
        return "0.1", "no v0.2+ feature (include, store_conf, unrolling, v0.2 layer types) is used", None
    first = min(v2, key=lambda x: (x[1].line, x[1].col))
    for n, loc in names.items():
        if n in _DEV_ONLY:
            return "dev", why(f"the dev-branch field '{n}'", loc), loc
    for n, loc in list(names.items()) + list(idents.items()):
        if n in _V03_ONLY:
            return "0.3", why(f"'{n}'", loc), loc
    if batchsize_twice is not None:
        return "0.3", why("a repeated store_conf.batchsize", batchsize_twice), batchsize_twice
    for n in ("prefetch_conf", "kPrefetch"):
        if n in names or n in idents:
            loc = names.get(n) or idents.get(n)
            return "0.2", why(f"'{n}' (removed in v0.3) together with {first[0]}", loc), loc
    return "0.3", why(f"'{first[0]}'", first[1]), first[1]


# ------------------------------------------------------------------------------------------
# Output data

@dataclass
class SingaParam:
    """A parameter of a node. With K > 1 every partition's node lists its own params under the same
    name: for partition_dim 0 they are replicas sharing partition 0's data, for partition_dim 1
    each partition owns a distinct slice (spec 5.9)."""
    name: str                    # SINGA's param name ('0#w1', 'w1', 'conv1@00$' for unnamed v0.1 params)
    shape: list[int]
    share_from: str | None = None  # owner's name (unrolled copies: '0#<name>')
    loc: Loc | None = None
    conf: dict = field(default_factory=dict)  # init / lr_scale / wd_scale (the owner's, when shared)


@dataclass
class SingaNode:
    name: str                 # node name as SINGA builds it: '0#conv1@0', 'conv1@00', 'split(0#relu2)@0', ...
    layer: str                # its layer in the built net: '0#conv1', 'split(0#relu2)', 'conv1'
    origin: str               # the config layer it comes from ('conv1'); connection layers: the layer they serve
    type: str                 # LayerType identifier, or 'user:<user_type>'
    srcs: list[str]           # source node names, in SINGA's edge order (the order Setup sees them)
    dsts: list[str]
    pid: int                  # partition id = worker
    partition_dim: int
    num_partitions: int
    shape: list[int]          # main data blob; [] when the layer has none
    params: list[SingaParam]
    conf: dict                # the configuration values Setup used (kernel, stride, num_output, ...)
    layer_conf: dict          # the layer's *_conf messages as plain dicts (defaults filled), extensions as '[name]'
    loc: Loc | None
    unroll_index: int = 0
    generated: bool = False   # split/slice/concate/bridge layers SINGA adds
    batchsize: int | None = None       # kShardData / kLMDBData: per-partition batch
    record_shape: list[int] | None = None  # kShardData / kLMDBData: shape of one record

    def to_reference(self) -> dict:
        """This node in the format of /work/shared/reference/singa/*.jsonl."""
        d = {"node": self.name, "type": self.type, "src": list(self.srcs), "pid": self.pid}
        if self.type in ("kShardData", "kLMDBData"):
            d["batchsize"] = self.batchsize
            d["record_shape"] = self.record_shape
        d["shape"] = list(self.shape)
        if self.params:
            d["params"] = [list(p.shape) for p in self.params]
        return d


@dataclass
class SingaNet:
    file: str
    version: str              # '0.1' | '0.2' | '0.3' | 'dev'
    phase: str                # 'kTrain' | 'kTest' | 'kVal'
    K: int                    # partitions (workers per group)
    nodes: list[SingaNode]    # SINGA's topological (Setup/execution) order
    diagnostics: list[Diagnostic] = field(default_factory=list)  # warnings
    non_singa: list[str] = field(default_factory=list)  # where netc deliberately differs (opt-in fix-ups)
    job: object = None        # the typed JobProto (Msg)
    version_reason: str = ""

    def node(self, name: str) -> SingaNode:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def to_reference(self) -> list[dict]:
        return [n.to_reference() for n in self.nodes]


@dataclass
class UserLayerRule:
    """Shape rule for a `user_type` layer (spec 3.3): setup(conf, src_shapes, K) returns
    (shape, [param shapes]); conf is the layer's LayerProto (Msg; extensions via
    conf.extensions()). src_conn / dst_conn as in spec 3.2."""
    setup: object
    src_conn: str = "kOneToOne"
    dst_conn: str = "kOneToOne"
    min_params: int = 0


def _ext(conf, short):
    for k, v in conf.extensions().items():
        if k.rsplit(".", 1)[-1] == short:
            return v
    return None


def _rnnlm_data(conf, srcs, K):
    dc = _ext(conf, "data_conf")
    w = dc.get("max_window") if dc is not None else 0
    return [w + 1, 4], []


def _rnnlm_embedding(conf, srcs, K):
    ec = _ext(conf, "embedding_conf")
    wd, vs = (ec.get("word_dim"), ec.get("vocab_size")) if ec is not None else (0, 0)
    return [srcs[0][0], wd], [[vs, wd]]


def _rnnlm_hidden(conf, srcs, K):
    return list(srcs[0]), [[srcs[0][1], srcs[0][1]]]


def _rnnlm_loss(conf, srcs, K):
    lc = _ext(conf, "loss_conf")
    vs, nc = (lc.get("vocab_size"), lc.get("nclass")) if lc is not None else (0, 0)
    vdim = srcs[0][1]
    return [], [[vs, vdim], [nc, vdim]]


def _rnnlm_label(conf, srcs, K):
    return list(srcs[0]), []


# The rnnlm example's user layers (spec appendix B). Assumptions beyond the appendix: the data
# layer fans out without a split (it derives from SINGA's input layer class, kOneToMany), the
# v0.1 "kLabel" user layer keeps its source's shape, and the loss layer has no data blob.
RNNLM_PLUGIN = {
    "kData": UserLayerRule(_rnnlm_data, dst_conn="kOneToMany"),
    "kLabel": UserLayerRule(_rnnlm_label),
    "kEmbedding": UserLayerRule(_rnnlm_embedding, min_params=1),
    "kHidden": UserLayerRule(_rnnlm_hidden, min_params=1),
    "kLoss": UserLayerRule(_rnnlm_loss, min_params=2),
}


# ------------------------------------------------------------------------------------------
# Layer classes (spec 3.2, 3.3)

_INPUTS_V1 = {"kShardData", "kLMDBData", "kMnist", "kRGBImage", "kLabel"}
_INPUTS_V2 = _INPUTS_V1 | {"kRecordInput", "kCSVInput", "kImagePreprocess", "kCharRNN", "kRNNLabel", "kOneHot"}
_REGISTERED_V1 = {"kBridgeDst", "kBridgeSrc", "kConvolution", "kCConvolution", "kCPooling", "kConcate",
                  "kDropout", "kEuclideanLoss", "kInnerProduct", "kLabel", "kLRN", "kMnist", "kPrefetch",
                  "kPooling", "kRBMHid", "kRBMVis", "kRGBImage", "kReLU", "kShardData", "kSigmoid", "kSlice",
                  "kSoftmaxLoss", "kSplit", "kSTanh", "kLMDBData"}
_REGISTERED_V2 = {"kRecordInput", "kCSVInput", "kImagePreprocess", "kRecordOutput", "kCSVOutput", "kCharRNN",
                  "kRNNLabel", "kOneHot", "kCharRNNOutput", "kBridgeDst", "kBridgeSrc", "kConcate", "kSlice",
                  "kSplit", "kRNNDummy", "kAccuracy", "kArgSort", "kConvolution", "kCConvolution", "kCPooling",
                  "kEmbedding", "kDropout", "kDummy", "kEuclideanLoss", "kInnerProduct", "kLabel", "kLRN",
                  "kMnist", "kPooling", "kRBMHid", "kRBMVis", "kRGBImage", "kReLU", "kShardData", "kSigmoid",
                  "kSoftmaxLoss", "kSTanh", "kSoftmax", "kGRU", "kLMDBData", "kCudnnConv", "kCudnnPool",
                  "kCudnnLRN", "kCudnnSoftmax", "kCudnnActivation", "kCudnnSoftmaxLoss",
                  "kActivation", "kBM", "kCudnnBM"}  # the last three: v0.3 only (not in v0.2's enum)
_TERMINAL = {"kSoftmaxLoss", "kEuclideanLoss", "kCudnnSoftmaxLoss", "kAccuracy", "kArgSort", "kCSVOutput",
             "kRecordOutput", "kCharRNNOutput", "kSoftmax", "kCudnnSoftmax"}
_BASE = {"kCConvolution": "kConvolution", "kCudnnConv": "kConvolution", "kCPooling": "kPooling",
         "kCudnnPool": "kPooling", "kCudnnLRN": "kLRN", "kCudnnActivation": "kActivation",
         "kCudnnSoftmax": "kSoftmax", "kCudnnBM": "kBM", "kCSVInput": "kRecordInput",
         "kLMDBData": "kShardData", "kSigmoid": "kActivation", "kSTanh": "kActivation", "kReLU": "kActivation",
         "kDropout": "kActivation", "kRecordOutput": "kCSVOutput", "kCharRNNOutput": "kCSVOutput"}


class _P:
    __slots__ = ("name", "orig", "share_from", "user_share", "msg", "loc", "owner")

    def __init__(self, name, orig, share_from, user_share, msg, loc):
        self.name, self.orig, self.share_from, self.user_share = name, orig, share_from, user_share
        self.msg, self.loc, self.owner = msg, loc, None


class _Lay:
    __slots__ = ("name", "type", "proto", "srcs", "pdim", "params", "unroll_index", "loc", "origin",
                 "gen", "pid", "made_for")

    def __init__(self, name, type, proto, pdim, loc, origin, unroll_index=0, gen=None):
        self.name, self.type, self.proto, self.pdim, self.loc = name, type, proto, pdim, loc
        self.origin, self.unroll_index, self.gen = origin, unroll_index, gen
        self.srcs: list[str] = []
        self.params: list[_P] = []
        self.pid = 0
        self.made_for = None


class _Node:
    __slots__ = ("name", "lay", "pid", "K", "srcs", "dsts", "shape", "params", "conf", "blobs",
                 "batchsize", "record_shape", "failed")

    def __init__(self, name, lay, pid, K):
        self.name, self.lay, self.pid, self.K = name, lay, pid, K
        self.srcs: list[_Node] = []
        self.dsts: list[_Node] = []
        self.shape = None
        self.params = []
        self.conf = {}
        self.blobs = None
        self.batchsize = self.record_shape = None
        self.failed = False


def _edge(a: _Node, b: _Node):
    a.dsts.append(b)
    b.srcs.append(a)


class _SetupError(Exception):
    pass


class _Ctx:
    def __init__(self, version, file, phase, K, plugins, record_shapes, fix_share_from):
        self.version, self.file, self.phase, self.K = version, file, phase, K
        self.v1 = version == "0.1"
        self.plugins = plugins or {}
        self.record_shapes = record_shapes or {}
        self.fix_share_from = fix_share_from
        self.errors: list[Diagnostic] = []
        self.warnings: list[Diagnostic] = []
        self.non_singa: list[str] = []
        self._warned = set()

    @property
    def label(self):
        return _V_LABEL[self.version]

    def error(self, msg, loc, note=None, width=1):
        d = Diagnostic("error", msg, loc, width=width)
        if note:
            for n in (note if isinstance(note, list) else [note]):
                d.note(*n) if isinstance(n, tuple) else d.note(n)
        self.errors.append(d)
        return d

    def warn(self, msg, loc, key=None):
        if key is not None:
            if key in self._warned:
                return None
            self._warned.add(key)
        d = Diagnostic("warning", msg, loc)
        self.warnings.append(d)
        return d

    def check(self):
        if self.errors:
            errs, self.errors = self.errors, []
            raise NetcError(errs)

    def src_conn(self, t):
        if t.startswith("user:"):
            r = self.plugins.get(t[5:])
            return r.src_conn if r else "kOneToOne"
        if t in ("kConvolution", "kCConvolution", "kCudnnConv", "kSoftmax", "kCudnnSoftmax"):
            return "kOneToAll"
        if t == "kInnerProduct":
            return "kOneToOne" if self.v1 else "kOneToAll"
        if t == "kSoftmaxLoss":
            return "kOneToAll" if self.v1 else "kOneToOne"
        return "kOneToOne"

    def dst_conn(self, t):
        if t.startswith("user:"):
            r = self.plugins.get(t[5:])
            return r.dst_conn if r else "kOneToOne"
        if t in (_INPUTS_V1 if self.v1 else _INPUTS_V2) or (not self.v1 and t == "kGRU"):
            return "kOneToMany"
        return "kOneToOne"


def _ltype(L: Msg) -> str:
    return "user:" + L.get("user_type") if L.has("user_type") else L.get("type")


def _phase_filter(ctx: _Ctx, net: Msg):
    """Spec 5.2 / 6 (v0.1 has exclude only). Returns the kept LayerProtos and, for B7's notes,
    every layer name with the phases it is excluded from."""
    layers = net.get("layer")
    inc = [L for L in layers if L.has("include")]
    exc = [L for L in layers if L.has("exclude")]
    if inc and exc:  # B12: SINGA's check depends on layer order; netc rejects any mixing
        ctx.error("this net uses both 'include' and 'exclude' (SINGA: \"Don't use include and exclude "
                  "together\"; its check depends on the order of the layers)", exc[0].at("exclude"),
                  note=[("'include' is used here", inc[0].at("include"))])
        ctx.check()
    kept = []
    for L in layers:
        keep = True
        if L.has("exclude") and ctx.phase in L.get("exclude"):
            keep = False
        if L.has("include"):
            keep = ctx.phase in L.get("include")  # equality per value: include: kPositive never matches
        if keep:
            kept.append(L)
    if not layers:
        ctx.error("the net has no layers", net.loc)
    elif not kept:
        ctx.error(f"no layer of the net is kept in phase {ctx.phase}", net.loc)
    seen = {}
    for L in kept:
        name = L.get("name")
        if name in seen:
            ctx.error(f"layer name '{name}' is used twice in phase {ctx.phase} (names must be unique after "
                      f"phase filtering)", L.at("name"), note=[("first defined here", seen[name].at("name"))])
            continue
        seen[name] = L
        bad = [c for c in "@#+" if c in name]
        if not name:
            ctx.error("empty layer name", L.at("name"))
        elif bad:
            ctx.error(f"layer name '{name}' contains '{bad[0]}'; SINGA reserves '@', '#' and '+' for the names it "
                      f"generates, so such names are ambiguous", L.at("name"))
    ctx.check()
    return kept, {L.get("name") for L in layers}


def _check_types(ctx: _Ctx, kept):
    reg = _REGISTERED_V1 if ctx.v1 else _REGISTERED_V2
    for L in kept:
        t = _ltype(L)
        if t.startswith("user:"):
            if t[5:] not in ctx.plugins:
                d = ctx.error(f"layer '{L.get('name')}' is a user layer (user_type \"{t[5:]}\") and netc has no "
                              f"shape rule for it", L.at("user_type"))
                known = ", ".join(sorted(RNNLM_PLUGIN))
                d.note(f"pass plugins={{'{t[5:]}': UserLayerRule(...)}}; netc.frontend.singa.RNNLM_PLUGIN has the "
                       f"rules of SINGA's rnnlm example ({known})")
        elif t == "kUserLayer":
            ctx.error(f"layer '{L.get('name')}' has no type: kUserLayer (the default) needs a 'user_type'",
                      L.at("type") if L.has("type") else L.at("name"))
        elif t == "kPrefetch":
            ctx.error("kPrefetch layers (with sublayers) are not supported by netc", L.at("type"))
        elif t not in reg:
            ctx.error(f"layer type {t} has no layer class in {ctx.label} (SINGA's factory aborts)", L.at("type"))
        elif t in ("kActivation", "kBM", "kCudnnBM") and ctx.version == "0.2":
            ctx.error(f"layer type {t} needs SINGA v0.3", L.at("type"))
    ctx.check()


def _unknown_src(ctx, L, S, loc, kept_names, all_names):
    name = L.get("name")
    d = ctx.error(f"unknown source layer '{S}' of layer '{name}' (in phase {ctx.phase})", loc, width=len(S) + 2)
    if S in all_names:
        d.note(f"layer '{S}' exists in the file but is not part of phase {ctx.phase}")
    else:
        cand = did_you_mean(S, kept_names)
        if cand:
            d.note(f"did you mean '{cand}'?")
    if ctx.v1:
        d.note("SINGA v0.1 aborts here (uncaught std::out_of_range)")
    else:
        d.note("SINGA v0.2/v0.3 silently connects an unknown source to the first layer of the net")


# ------------------------------------------------------------------------------------------
# v0.2 / v0.3 construction (spec 5)

def _build_v2(ctx: _Ctx, job: Msg) -> list[_Node]:
    net = job.get("neuralnet")
    K = ctx.K
    kept, all_names = _phase_filter(ctx, net)
    _check_types(ctx, kept)
    kept_names = [L.get("name") for L in kept]
    # 5.1 / 5.3 unrolling
    copies: dict[str, list[_Lay]] = {}
    lays: list[_Lay] = []
    for L in kept:
        name = L.get("name")
        n = L.get("unroll_len") if L.has("unroll_len") else net.get("unroll_len")
        if n < 1:
            ctx.error(f"unroll_len of layer '{name}' is {n}; it must be at least 1",
                      L.at("unroll_len") if L.has("unroll_len") else net.at("unroll_len"))
            n = 1
        pd = L.get("partition_dim") if L.has("partition_dim") else net.get("partition_dim")
        cl = []
        for i in range(n):
            lay = _Lay(f"{i}#{name}", _ltype(L), L, pd, L.at("name"), name, i)
            for p in L.get("param"):
                pn = p.get("name")
                user = p.get("share_from") if (i == 0 and p.has("share_from")) else None
                share = user if i == 0 else f"0#{pn}"
                lay.params.append(_P(f"{i}#{pn}", pn, share, user is not None, p, p.loc))
            cl.append(lay)
            lays.append(lay)
        copies[name] = cl
    ctx.check()
    for L in kept:
        name = L.get("name")
        cts, shs = L.get("unroll_conn_type"), L.get("shift")
        for k, (S, sloc) in enumerate(zip(L.get("srclayers"), L.vlocs_of("srclayers"))):
            if S not in copies:
                _unknown_src(ctx, L, S, sloc, kept_names, all_names)
                continue
            ct = cts[k] if k < len(cts) else "kUnrollOneToOne"
            sh = shs[k] if k < len(shs) else 0
            sc = copies[S]
            for j, lay in enumerate(copies[name]):
                if ct == "kUnrollOneToAll":
                    lay.srcs.extend(c.name for c in sc)
                elif ct == "kUnrollOneToOne":
                    if j >= sh:
                        if j - sh >= len(sc):  # B5
                            ctx.error(f"copy {j} of layer '{name}' reads copy {j - sh} of source '{S}', which has only "
                                      f"{len(sc)} cop{'y' if len(sc) == 1 else 'ies'} (SINGA reads out of range)", sloc,
                                      note=["unrolled layers that read a shorter source need "
                                            "`unroll_conn_type: kUnrollOneToAll` (as char-rnn does) or a matching "
                                            "unroll_len"])
                            break
                        lay.srcs.append(sc[j - sh].name)
                elif ct == "kUnrollFirstToLast":
                    if j == 0:
                        lay.srcs.append(sc[-1].name)
                else:
                    ctx.error(f"unroll_conn_type {ct} is not implemented by SINGA", L.vlocs_of("unroll_conn_type")[k])
                    break
        if _ltype(L) == "kGRU":
            cl = copies[name]
            for j in range(1, len(cl)):
                cl[j].srcs.append(cl[j - 1].name)  # the recurrent edge
    ctx.check()
    # 5.4 share_from
    pmap: dict[str, _P] = {}
    for lay in lays:
        for p in lay.params:
            if p.name in pmap:
                other = pmap[p.name]
                if p.orig == "":  # B11
                    ctx.error(f"layer '{lay.origin}' has an unnamed param and so does layer "
                              f"'{_owner_layer(lays, other)}': SINGA names every unnamed param '{p.name}' and aborts "
                              f"(\"Repeated param\")", p.loc,
                              note=[("the other unnamed param", other.loc), "give every param a unique name"])
                else:
                    ctx.error(f"param name '{p.orig}' is used twice (SINGA: \"Repeated param = {p.name}\")", p.loc,
                              note=[("first used here", other.loc)])
            else:
                pmap[p.name] = p
    for lay in lays:
        for p in lay.params:
            if not p.share_from:
                continue
            sf = p.share_from
            floc = p.msg.vat("share_from") if p.user_share else p.loc
            if sf in pmap:
                p.owner = pmap[sf]
            elif p.user_share and ("0#" + sf) in pmap:  # B1
                if ctx.fix_share_from:
                    p.share_from = "0#" + sf
                    p.owner = pmap[p.share_from]
                    ctx.non_singa.append(f"share_from \"{sf}\" of param '{p.orig}' (layer '{lay.origin}') resolved "
                                         f"to '0#{sf}' ({ctx.label} aborts instead)")
                else:
                    ctx.error(f"share_from \"{sf}\" of param '{p.orig}' in layer '{lay.origin}' names no param: "
                              f"{ctx.label}'s unrolling renames every param to '<i>#<name>', so the owner is now "
                              f"'0#{sf}' and SINGA aborts (\"can't find share_from = {sf}\")", floc,
                              note=["pass fix_share_from=True to resolve it to '0#" + sf + "' (netc's fix-up, "
                                    "not SINGA behaviour)"])
            else:
                cand = did_you_mean(sf, [q.orig for q in pmap.values()])
                ctx.error(f"share_from \"{sf}\" of param '{p.orig}' in layer '{lay.origin}' names no param in phase "
                          f"{ctx.phase}" + (f"; did you mean '{cand}'?" if cand else ""), floc)
    ctx.check()
    # 5.5 split insertion
    dst_count: dict[str, int] = {}
    for lay in lays:
        for s in lay.srcs:
            dst_count[s] = dst_count.get(s, 0) + 1
    splits = []
    for lay in lays:
        c = dst_count.get(lay.name, 0)
        if c > 1 and ctx.dst_conn(lay.type) == "kOneToOne":
            sp = _Lay(f"split({lay.name})", "kSplit", None, lay.pdim, lay.loc, lay.origin, gen={"num_splits": c})
            sp.srcs = [lay.name]
            splits.append((lay.name, sp))
    for x, sp in splits:
        for lay in lays:
            lay.srcs = [sp.name if s == x else s for s in lay.srcs]
    lays += [sp for _, sp in splits]
    # 5.6 connection layers
    by_name = {lay.name: lay for lay in lays}
    if K > 1:
        conn = []
        dup_srcs = set()

        def add(name, t, pd, src, gen, made_for):
            if name in by_name:  # B2
                other = by_name[name]
                if src.name in dup_srcs:  # the concate of a duplicated split/slice: already reported
                    return other
                dup_srcs.add(name)
                ctx.error(f"SINGA names connection layers after their source only: '{name}' is needed for "
                          f"'{made_for.name}' and for '{other.made_for.name if other.made_for else other.name}', "
                          f"and SINGA aborts (\"node {name}@0 already exists\")", made_for.loc,
                          note=[(f"'{other.made_for.name if other.made_for else other.name}' is here", other.loc)])
                return other
            lay = _Lay(name, t, None, pd, src.loc if t in ("kSplit", "kSlice") else made_for.loc, made_for.origin,
                       gen=gen)
            lay.srcs, lay.made_for = [src.name], made_for
            by_name[name] = lay
            conn.append(lay)
            return lay

        for D in lays:
            pd, ct = D.pdim, ctx.src_conn(D.type)
            new = []
            for sname in D.srcs:
                S = by_name[sname]
                ps = S.pdim
                if ps != pd and (ps == -1 or pd == -1):  # B6
                    ctx.error(f"partition_dim -1 is unsupported by SINGA v0.2/v0.3 with K > 1: layer '{D.origin}' "
                              f"(partition_dim {pd}) reads '{S.origin}' (partition_dim {ps}); SINGA builds a slice "
                              f"or concate on dimension -1 and aborts", D.loc)
                    new.append(sname)
                    continue
                if pd == 1 and ct == "kOneToAll":
                    sp = add(f"split({sname})", "kSplit", ps, S, {"num_splits": K}, D)
                    cc = add(f"concate({sp.name})", "kConcate", pd, sp, {"concate_dim": ps, "num_concates": K}, D)
                    new.append(cc.name)
                elif ps == pd:
                    new.append(sname)
                else:
                    sl = add(f"slice({sname})", "kSlice", ps, S, {"slice_dim": pd, "num_slices": K}, D)
                    cc = add(f"concate({sl.name})", "kConcate", pd, sl, {"concate_dim": ps, "num_concates": K}, D)
                    new.append(cc.name)
            D.srcs = new
        lays += conn
        # B16
        for lay in lays:
            if lay.pdim == 1:
                for p in lay.params:
                    if p.share_from:
                        ctx.error(f"param '{p.name}' of layer '{lay.name}' shares from '{p.share_from}' on a "
                                  f"partition_dim 1 layer with K = {K}: SINGA's param names carry no partition, so it "
                                  f"resolves to an arbitrary partition's slice", p.loc)
    ctx.check()
    # 5.7 nodes and edges
    nodes: list[_Node] = []
    by_node: dict[str, _Node] = {}
    lay_nodes: dict[str, list[_Node]] = {}

    def add_node(name, lay, pid, k):
        if name in by_node:
            ctx.error(f"node '{name}' is created twice (SINGA: \"node {name} already exists\")", lay.loc)
            ctx.check()
        n = _Node(name, lay, pid, k)
        nodes.append(n)
        by_node[name] = n
        return n

    for lay in lays:
        lay_nodes[lay.name] = [add_node(f"{lay.name}@{i}", lay, i, K) for i in range(K)]
    for D in lays:
        dn = lay_nodes[D.name]
        for sname in D.srcs:
            sn = lay_nodes[sname]
            if D.type == "kConcate":
                for i in range(K):
                    for j in range(K):
                        if i == j:
                            _edge(sn[i], dn[j])
                        else:
                            tag = f"{sn[i].name}->{dn[j].name}"
                            bs = _Lay(f"bridge_src({tag})", "kBridgeSrc", None, D.pdim, D.loc, D.origin, gen={})
                            bd = _Lay(f"bridge_dst({tag})", "kBridgeDst", None, D.pdim, D.loc, D.origin, gen={})
                            bsn, bdn = add_node(bs.name, bs, i, K), add_node(bd.name, bd, j, K)
                            _edge(sn[i], bsn)
                            _edge(bsn, bdn)
                            _edge(bdn, dn[j])
            else:
                for i in range(K):
                    _edge(sn[i], dn[i])
    return nodes


def _owner_layer(lays, p):
    for lay in lays:
        if p in lay.params:
            return lay.origin
    return "?"


# ------------------------------------------------------------------------------------------
# v0.1 construction (spec 6)

def _build_v1(ctx: _Ctx, job: Msg) -> list[_Node]:
    net = job.get("neuralnet")
    K = ctx.K
    kept, all_names = _phase_filter(ctx, net)
    _check_types(ctx, kept)
    kept_names = [L.get("name") for L in kept]
    protos = {L.get("name"): L for L in kept}
    lays: dict[str, _Lay] = {}
    pmap: dict[str, _P] = {}
    for L in kept:
        name = L.get("name")
        pd = L.get("partition_dim") if L.has("partition_dim") else net.get("partition_dim")
        lay = _Lay(name, _ltype(L), L, pd, L.at("name"), name)
        lay.pid = L.get("partition_id")
        for p in L.get("param"):
            pn = p.get("name")
            q = _P(pn, pn, p.get("share_from") if p.has("share_from") else None, True, p, p.loc)
            lay.params.append(q)
            if pn:
                if pn in pmap:
                    ctx.error(f"param name '{pn}' is used twice (SINGA v0.1 requires unique param names)", p.loc,
                              note=[("first used here", pmap[pn].loc)])
                else:
                    pmap[pn] = q
        lays[name] = lay
        if pd not in (-1, 0, 1):
            ctx.error(f"partition_dim {pd} of layer '{name}' is invalid (SINGA v0.1: -1, 0 or 1)",
                      L.at("partition_dim") if L.has("partition_dim") else net.at("partition_dim"))
    for lay in lays.values():
        for p in lay.params:
            if p.share_from:
                if p.share_from in pmap:
                    p.owner = pmap[p.share_from]
                else:
                    cand = did_you_mean(p.share_from, pmap)
                    ctx.error(f"share_from \"{p.share_from}\" of param '{p.orig}' in layer '{lay.name}' names no param "
                              f"in phase {ctx.phase} (SINGA: \"can't find param {p.share_from}\")"
                              + (f"; did you mean '{cand}'?" if cand else ""), p.msg.vat("share_from"))
    ctx.check()
    nodes: list[_Node] = []
    by_node: dict[str, _Node] = {}

    def add_node(name, lay, pid, k):
        if name in by_node:
            ctx.error(f"node '{name}' is created twice (SINGA aborts)", lay.loc)
            ctx.check()
        n = _Node(name, lay, pid, k)
        nodes.append(n)
        by_node[name] = n
        return n

    lay_nodes: dict[str, list[_Node]] = {}
    for L in kept:
        lay = lays[L.get("name")]
        if lay.pdim in (0, 1):
            lay_nodes[lay.name] = [add_node(f"{lay.name}@{i:02d}", lay, i, K) for i in range(K)]
        else:
            lay_nodes[lay.name] = [add_node(lay.name, lay, lay.pid, 1)]
    conn_used = []
    for L in kept:
        D = lays[L.get("name")]
        dn = lay_nodes[D.name]
        pd, ct = D.pdim, ctx.src_conn(D.type)
        for S, sloc in zip(L.get("srclayers"), L.vlocs_of("srclayers")):
            if S not in lays:
                _unknown_src(ctx, L, S, sloc, kept_names, all_names)
                continue
            Sl = lays[S]
            sn, ps = lay_nodes[S], Sl.pdim
            if ps == -1:
                if pd == 0 or (pd == 1 and ct == "kOneToOne"):
                    sl = _Lay(f"{S}<", "kSlice", None, -1, Sl.loc, S, gen={"slice_dim": pd, "num_slices": len(dn)})
                    sl.made_for = D
                    x = add_node(sl.name, sl, sn[0].pid, 1)
                    _edge(sn[0], x)
                    for d in dn:
                        _edge(x, d)
                    conn_used.append(x)
                elif pd == -1:
                    _edge(sn[0], dn[0])
                else:
                    sp = _Lay(f"{S}+", "kSplit", None, -1, Sl.loc, S, gen={"num_splits": len(dn)})
                    x = add_node(sp.name, sp, sn[0].pid, 1)
                    _edge(sn[0], x)
                    for d in dn:
                        _edge(x, d)
                    conn_used.append(x)
            elif pd == -1 or (pd == 1 and ct == "kOneToAll" and ps == 0):
                for d in dn:
                    cc = _Lay(">" + d.name, "kConcate", None, pd, D.loc, D.name, gen={"concate_dim": ps})
                    x = add_node(cc.name, cc, d.pid, 1)
                    for s in sn:
                        _edge(s, x)
                    _edge(x, d)
                    conn_used.append(x)
            elif ps != pd:
                ctx.error(f"SINGA v0.1 cannot connect layer '{S}' (partition_dim {ps}) to '{D.name}' (partition_dim "
                          f"{pd}): \"not implemented\"", sloc)
            elif ps == 1 and ct == "kOneToAll":
                ctx.error(f"SINGA v0.1 cannot connect '{S}' to '{D.name}' (both partition_dim 1, '{D.name}' is "
                          f"kOneToAll): \"in wrong branch, not implemented\"", sloc)
            else:
                for i in range(len(dn)):
                    _edge(sn[i], dn[i])
    ctx.check()
    order = _sort(ctx, nodes)
    # split insertion after the fact (in sorted order); the split node is appended
    for n in list(order):
        if len(n.dsts) > 1 and ctx.dst_conn(n.lay.type) == "kOneToOne":
            dsts = list(n.dsts)
            for d in dsts:
                n.dsts.remove(d)
                d.srcs.remove(n)
            sp = _Lay(n.name + "+", "kSplit", None, n.lay.pdim, n.lay.loc, n.lay.origin, gen={"num_splits": len(dsts)})
            x = add_node(sp.name, sp, n.pid, 1)
            order.append(x)
            _edge(n, x)
            for d in dsts:
                _edge(x, d)
            conn_used.append(x)
    # B3: v0.1 never inserts bridges
    for n in order:
        for d in n.dsts:
            if d.pid != n.pid:
                ctx.error(f"edge from '{n.name}' (worker {n.pid}) to '{d.name}' (worker {d.pid}) crosses workers, and "
                          f"SINGA v0.1 never inserts the bridge layers that would carry it (its bridge pass compares a "
                          f"node's partition with itself)", d.lay.loc)
                break
    ctx.check()
    order = _sort(ctx, order)  # SINGA sorts again after adding the split nodes
    if conn_used:  # B4
        kinds = sorted({x.lay.type for x in conn_used})
        ctx.warn(f"SINGA v0.1 cannot run this net: it needs {', '.join(kinds)} layers, whose v0.1 implementation "
                 f"is missing (\"Not implemented\")", conn_used[0].lay.loc, key="B4")
    return order


# ------------------------------------------------------------------------------------------
# Graph::Sort (spec 5.8)

def _sort(ctx: _Ctx, nodes: list[_Node]) -> list[_Node]:
    queue = deque(n for n in nodes if not n.srcs)
    queued = set(queue)
    visited = set()
    order = []
    stalls = 0
    while queue:
        n = queue.popleft()
        srcs = n.srcs
        bi = any(n in s.srcs for s in srcs)
        if bi and len(srcs) > 1:
            ready = srcs[0] in visited
        else:
            ready = all(s in visited for s in srcs)
        if ready:
            order.append(n)
            visited.add(n)
            stalls = 0
            for d in n.dsts:
                if d not in queued:
                    queued.add(d)
                    queue.append(d)
        else:
            queue.append(n)
            stalls += 1
            if stalls > len(queue):
                break
    if len(order) != len(nodes):
        _cycle_error(ctx, [n for n in nodes if n not in visited])
    return order


def _cycle_error(ctx, rest):
    rest_set = set(rest)
    # find a cycle by walking sources inside the unsorted part
    for start in rest:
        path, pos, n = [], {}, start
        while n is not None and n not in pos:
            pos[n] = len(path)
            path.append(n)
            n = next((s for s in n.srcs if s in rest_set), None)
        if n is not None:
            cyc = list(reversed(path[pos[n]:]))
            names = " -> ".join(x.lay.origin for x in cyc + [cyc[0]])
            ctx.error(f"the net has a cycle ({names}); SINGA's topological sort accepts only the two-layer "
                      f"RBMVis <-> RBMHid kind and loops forever on this one", cyc[0].lay.loc)
            ctx.check()
    ctx.error(f"{len(rest)} node(s) cannot be ordered (not reachable from a layer without sources): "
              f"{', '.join(n.name for n in rest[:5])}{', ...' if len(rest) > 5 else ''}", rest[0].lay.loc)
    ctx.check()


# ------------------------------------------------------------------------------------------
# Setup: output and parameter shapes (spec 7)

def _cdiv(a: int, b: int) -> int:
    """C++ integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _count(shape):
    return math.prod(shape[1:])


def _chw(shape, what="input"):
    if len(shape) >= 4:
        return shape[-3], shape[-2], shape[-1]
    if len(shape) == 3:
        return 1, shape[-2], shape[-1]
    raise _SetupError(f"needs a 3-D or 4-D {what}, got {shape}")


def _nsrc(ss, k, t):
    if len(ss) != k:
        raise _SetupError(f"{t} needs exactly {k} source layer{'s' if k > 1 else ''}, got {len(ss)}")


def _div(ctx, n, value, what):
    """value / K for partitioned sizes (B9)."""
    K = n.K
    if K > 1 and value % K:
        raise _SetupError(f"{what} {value} is not divisible by the {K} partitions (SINGA truncates silently to "
                          f"{value // K} per partition)")
    return value // K


def _geom(cc: Msg, v1: bool):
    if v1:
        k, p, s = cc.get("kernel"), cc.get("pad"), cc.get("stride")
        return (k, k), (p, p), (s, s)
    g = []
    for f in ("kernel", "pad", "stride"):
        if cc.has(f):
            g.append((cc.get(f), cc.get(f)))
        else:
            g.append((cc.get(f + "_y"), cc.get(f + "_x")))
    return tuple(g)


def _window(H, W, k, p, s):
    if s[0] <= 0 or s[1] <= 0:
        raise _SetupError(f"stride {list(s)} must be positive")
    oh = _cdiv(H + 2 * p[0] - k[0], s[0]) + 1
    ow = _cdiv(W + 2 * p[1] - k[1], s[1]) + 1
    if oh <= 0 or ow <= 0:
        raise _SetupError(f"kernel {list(k)} (pad {list(p)}) does not fit the {H}x{W} input (output {oh}x{ow})")
    return oh, ow


def _params(ctx, n, shapes, need, why=""):
    lay = n.lay
    have = len(lay.params)
    if have < need:  # B10
        raise _SetupError(f"needs {need} param entr{'y' if need == 1 else 'ies'} (`param {{ ... }}`), found {have}"
                          f"{why}; SINGA would read past the end of the list")
    if have > len(shapes):
        ctx.warn(f"layer '{lay.origin}' has {have} param entries; {lay.type} uses only the first {len(shapes)}",
                 lay.loc, key=("extra-params", lay.origin))
    n.params = [(lay.params[i], list(s)) for i, s in enumerate(shapes)]


def _record_shape(ctx, n, path):
    lay = n.lay
    if lay.origin in ctx.record_shapes:
        return list(ctx.record_shapes[lay.origin]), "override"
    p = (path or "").lower()
    if "mnist" in p:
        return [28, 28], "path"
    if "cifar" in p:
        return [3, 32, 32], "path"
    kinds = {d.lay.type for d in n.dsts}
    if "kMnist" in kinds:
        return [28, 28], "consumer"
    if "kRGBImage" in kinds:
        return [3, 32, 32], "consumer"
    return None, None


def _batch_src(n, ss, t):
    if not n.srcs or n.srcs[0].batchsize is None:
        raise _SetupError(f"{t} parses records, so its source must be a kShardData or kLMDBData layer")
    return n.srcs[0].batchsize


def _setup(ctx: _Ctx, n: _Node):
    lay, t = n.lay, n.lay.type
    L, gen = lay.proto, lay.gen
    ss = [s.shape for s in n.srcs]
    base = _BASE.get(t, t)
    v1 = ctx.v1
    conf = n.conf
    if t.startswith("user:"):
        rule = ctx.plugins[t[5:]]
        shape, pshapes = rule.setup(L, [list(s) for s in ss], n.K)
        _params(ctx, n, pshapes, rule.min_params)
        n.shape = list(shape)
        return
    if base == "kRecordInput":
        sc = L.get("store_conf")
        bs = sc.get("batchsize")
        if isinstance(bs, list):  # v0.3: repeated
            if not bs:
                raise _SetupError("store_conf.batchsize is not set")
            if lay.pdim == 0 and len(bs) == 1:
                b = _div(ctx, n, bs[0], "batchsize")
            elif len(bs) > 1:
                if n.pid >= len(bs):
                    raise _SetupError(f"partition {n.pid} has no store_conf.batchsize entry ({len(bs)} given)")
                b = bs[n.pid]
            else:
                b = bs[0]
        else:
            b = _div(ctx, n, bs, "batchsize") if lay.pdim == 0 else bs
        n.shape = [b] + list(sc.get("shape"))
        conf.update(batchsize=b, shape=list(sc.get("shape")), backend=sc.get("backend"), path=sc.get("path"),
                    mean_file=sc.get("mean_file"), std_file=sc.get("std_file"), mean_value=sc.get("mean_value"),
                    std_value=sc.get("std_value"), has_label=sc.get("has_label"), encoded=sc.get("encoded"))
    elif base == "kShardData":
        dp = L.get("sharddata_conf" if t == "kShardData" else "lmdbdata_conf")
        b = _div(ctx, n, dp.get("batchsize"), "batchsize") if lay.pdim == 0 else dp.get("batchsize")
        n.batchsize = b
        n.record_shape, how = _record_shape(ctx, n, dp.get("path"))
        n.shape = []
        conf.update(batchsize=b, path=dp.get("path"), record_shape=n.record_shape, record_shape_from=how)
    elif t == "kMnist":
        b = _batch_src(n, ss, t)
        rs = n.srcs[0].record_shape
        if rs is None:
            raise _SetupError(f"the record shape of '{n.srcs[0].lay.origin}' is unknown (SINGA reads it from the "
                              f"data file); pass record_shapes={{'{n.srcs[0].lay.origin}': [28, 28]}}")
        if len(rs) < 2 or rs[-1] != rs[-2]:
            raise _SetupError(f"kMnist needs square records, got {rs}")
        n.shape = [b, 1, rs[-1], rs[-1]]
        mc = L.get("mnist_conf")
        conf.update(norm_a=mc.get("norm_a"), norm_b=mc.get("norm_b"))
    elif t == "kRGBImage":
        b = _batch_src(n, ss, t)
        rs = n.srcs[0].record_shape
        if rs is None:
            raise _SetupError(f"the record shape of '{n.srcs[0].lay.origin}' is unknown (SINGA reads it from the "
                              f"data file); pass record_shapes={{'{n.srcs[0].lay.origin}': [3, 32, 32]}}")
        if len(rs) != 3:
            raise _SetupError(f"kRGBImage needs 3-D records, got {rs}")
        rc = L.get("rgbimage_conf")
        crop = rc.get("cropsize")
        n.shape = [b, rs[0], crop, crop] if crop else [b] + list(rs)
        conf.update(scale=rc.get("scale"), cropsize=crop, mirror=rc.get("mirror"), meanfile=rc.get("meanfile"))
    elif t == "kLabel":
        n.shape = [_batch_src(n, ss, t)]
    elif t == "kImagePreprocess":
        _nsrc(ss, 1, t)
        s = ss[0]
        if len(s) != 4 or s[2] != s[3]:
            raise _SetupError(f"kImagePreprocess needs a 4-D input with H == W, got {s}")
        rc = L.get("rgbimage_conf")
        crop = rc.get("cropsize")
        n.shape = [s[0], s[1], crop, crop] if crop and (crop != s[2] or crop != s[3]) else list(s)
        conf.update(cropsize=crop, mirror=rc.get("mirror"), scale=rc.get("scale"), meanfile=rc.get("meanfile"))
    elif base == "kConvolution":
        _nsrc(ss, 1, t)
        s = ss[0]
        C, H, W = _chw(s)
        cc = L.get("convolution_conf")
        k, p, st = _geom(cc, v1)
        F = cc.get("num_filters")
        if lay.pdim > 0:
            F = _div(ctx, n, F, "num_filters")
        oh, ow = _window(H, W, k, p, st)
        n.shape = [s[0], F, oh, ow]
        wshape = [F, C * k[0] * k[1]]
        if v1:
            _params(ctx, n, [wshape, [F]], 2, " (SINGA v0.1 convolution always reads 2)")
        else:
            _params(ctx, n, [wshape, [F]] if len(lay.params) >= 2 else [wshape], 1)
        conf.update(num_filters=F, kernel=list(k), pad=list(p), stride=list(st), bias=len(n.params) > 1)
    elif base == "kPooling":
        _nsrc(ss, 1, t)
        s = ss[0]
        C, H, W = _chw(s)
        pc = L.get("pooling_conf")
        k, p, st = _geom(pc, v1)
        if v1:
            if pc.get("pad"):  # B13
                ctx.warn(f"SINGA v0.1 pooling ignores pad ({pc.get('pad')}) in layer '{lay.origin}'; the shape is "
                         f"computed without it", pc.at("pad"), key=("B13", lay.origin))
            conf["pad_ignored"] = list(p)
            p = (0, 0)
        oh, ow = _window(H, W, k, p, st)
        n.shape = [s[0], C, oh, ow]
        conf.update(pool=pc.get("pool"), kernel=list(k), pad=list(p), stride=list(st))
    elif base == "kLRN":
        _nsrc(ss, 1, t)
        if len(ss[0]) != 4:
            raise _SetupError(f"{t} needs a 4-D input, got {ss[0]}")
        lc = L.get("lrn_conf")
        if lc.get("local_size") % 2 == 0:
            raise _SetupError(f"lrn_conf.local_size must be odd, got {lc.get('local_size')}")
        n.shape = list(ss[0])
        conf.update(local_size=lc.get("local_size"), alpha=lc.get("alpha"), beta=lc.get("beta"), knorm=lc.get("knorm"))
    elif base == "kActivation":
        _nsrc(ss, 1, t)
        n.shape = list(ss[0])
        if t in ("kActivation", "kCudnnActivation"):
            conf["activation"] = L.get("activation_conf").get("type")
        elif t == "kReLU":
            conf.update(activation="RELU", negative_slope=L.get("relu_conf").get("negative_slope"))
        elif t == "kSigmoid":
            conf["activation"] = "SIGMOID"
        elif t == "kSTanh":
            conf["activation"] = "STANH"
        elif t == "kDropout":
            conf["dropout_ratio"] = L.get("dropout_conf").get("dropout_ratio")
    elif t == "kInnerProduct":
        _nsrc(ss, 1, t)
        s = ss[0]
        ic = L.get("innerproduct_conf")
        h = ic.get("num_output")
        if lay.pdim > 0:
            h = _div(ctx, n, h, "num_output")
        vdim = _count(s)
        n.shape = [s[0], h]
        _params(ctx, n, [[vdim, h] if ic.get("transpose") else [h, vdim], [h]], 2,
                " (kInnerProduct always reads param 0 and 1)")
        conf.update(num_output=h, transpose=ic.get("transpose"), bias=True)
    elif base == "kSoftmax" or t == "kCudnnSoftmaxLoss":
        if t == "kCudnnSoftmaxLoss":
            _nsrc(ss, 2, t)
            conf.update(topk=L.get("softmaxloss_conf").get("topk"), scale=L.get("softmaxloss_conf").get("scale"))
        else:
            _nsrc(ss, 1, t)
        n.shape = [ss[0][0], _count(ss[0])]
    elif t == "kSoftmaxLoss":
        _nsrc(ss, 2, t)
        n.shape = list(ss[0])
        sc = L.get("softmaxloss_conf")
        conf.update(topk=sc.get("topk"), scale=sc.get("scale"))
    elif t == "kEuclideanLoss":
        _nsrc(ss, 2, t)
        n.shape = []
    elif t in ("kArgSort", "kAccuracy"):
        _nsrc(ss, 2 if t == "kAccuracy" else 1, t)
        topk = L.get("argsort_conf").get("topk")
        n.shape = [ss[0][0], topk]
        conf["topk"] = topk
    elif t == "kRBMVis":
        _nsrc(ss, 2, t)
        ins = [s for s in n.srcs if s.lay.type != "kRBMHid"]
        if len(ins) != 1:
            raise _SetupError("kRBMVis needs one kRBMHid source and one input source")
        hdim = L.get("rbm_conf").get("hdim")
        vdim = _count(ins[0].shape)
        n.shape = list(ins[0].shape)
        _params(ctx, n, [[hdim, vdim], [vdim]], 2)
        conf.update(hdim=hdim, gaussian=L.get("rbm_conf").get("gaussian"))
    elif t == "kRBMHid":
        _nsrc(ss, 1, t)
        hdim = L.get("rbm_conf").get("hdim")
        vdim = _count(ss[0])
        n.shape = [ss[0][0], hdim]
        _params(ctx, n, [[hdim, vdim], [hdim]], 2)
        conf.update(hdim=hdim, gaussian=L.get("rbm_conf").get("gaussian"))
    elif base == "kBM":
        _nsrc(ss, 1, t)
        if len(ss[0]) != 4:
            raise _SetupError(f"{t} needs a 4-D input, got {ss[0]}")
        C = ss[0][1]
        n.shape = list(ss[0])
        _params(ctx, n, [[1, C, 1, 1]] * 4, 4)
    elif t == "kGRU":
        if not 1 <= len(ss) <= 2:
            raise _SetupError(f"kGRU takes its input and the previous step, got {len(ss)} sources")
        h = L.get("gru_conf").get("dim_hidden")
        vdim = _count(ss[0])
        if len(lay.params) not in (6, 9):  # B10
            raise _SetupError(f"kGRU needs 6 param entries (z_hx, r_hx, c_hx, z_hh, r_hh, c_hh) or 9 (plus z_b, r_b, "
                              f"c_b), found {len(lay.params)}")
        shapes = [[h, vdim]] * 3 + [[h, h]] * 3 + ([[h]] * 3 if len(lay.params) > 6 else [])
        n.shape = [ss[0][0], h]
        _params(ctx, n, shapes, 6)
        conf.update(dim_hidden=h, bias=len(shapes) == 9)
    elif t in ("kEmbedding", "kOneHot", "kRNNLabel"):
        _nsrc(ss, 1, t)
        blobs = n.srcs[0].blobs or [ss[0]]
        idx = lay.unroll_index + (1 if t == "kRNNLabel" else 0)
        if idx >= len(blobs) or not blobs[idx]:
            raise _SetupError(f"reads blob {idx} of '{n.srcs[0].name}', which has {len(blobs)} blob(s)")
        b = blobs[idx][0]
        if t == "kEmbedding":
            ec = L.get("embedding_conf")
            n.shape = [b, ec.get("feature_dim")]
            _params(ctx, n, [[ec.get("vocab_size"), ec.get("feature_dim")]], 1)
            conf.update(vocab_size=ec.get("vocab_size"), feature_dim=ec.get("feature_dim"))
        elif t == "kOneHot":
            vs = L.get("onehot_conf").get("vocab_size")
            n.shape = [b, vs]
            conf["vocab_size"] = vs
        else:
            n.shape = []
            conf["label_size"] = b
    elif t == "kCharRNN":
        cc = L.get("char_rnn_conf")
        n.blobs = [[cc.get("batchsize")] for _ in range(cc.get("unroll_len") + 1)]
        n.shape = []
        conf.update(batchsize=cc.get("batchsize"), unroll_len=cc.get("unroll_len"), path=cc.get("path"),
                    vocab_path=cc.get("vocab_path"))
    elif t == "kRNNDummy":
        rc = L.get("rnn_dummy_conf")
        if ss:
            n.shape = list(ss[0])
        else:
            if rc.get("low") == rc.get("high"):
                raise _SetupError("kRNNDummy without a source needs rnn_dummy_conf.low != high")
            n.shape = list(rc.get("shape"))
        conf.update(shape=list(rc.get("shape")), integer=rc.get("integer"), low=rc.get("low"), high=rc.get("high"),
                    dynamic_srclayer=rc.get("dynamic_srclayer"))
    elif t == "kDummy":
        dc = L.get("dummy_conf")
        if dc.get("input"):
            n.shape = list(dc.get("shape"))
        else:
            _nsrc(ss, 1, t)
            n.shape = list(ss[0])
        conf.update(input=dc.get("input"), output=dc.get("output"))
    elif base == "kCSVOutput":
        n.shape = []
    elif t in ("kSplit", "kBridgeSrc", "kBridgeDst"):
        _nsrc(ss, 1, t)
        n.shape = list(ss[0])
        if t == "kSplit":
            conf["num_splits"] = gen["num_splits"] if gen else L.get("split_conf").get("num_splits")
    elif t == "kSlice":
        _nsrc(ss, 1, t)
        if gen is not None:
            dim, num = gen["slice_dim"], gen["num_slices"]
        else:
            sc = L.get("slice_conf")
            dim = sc.get("slice_dim")
            num = sc.get("num_slices") if sc.spec.fields.get("num_slices") else max(1, len(n.dsts))
        s = list(ss[0])
        if not 0 <= dim < len(s):
            raise _SetupError(f"slice dimension {dim} is out of range for the input {s}")
        if num < 1 or s[dim] % num:
            raise _SetupError(f"cannot slice dimension {dim} of {s} into {num} equal parts (must divide exactly)")
        s[dim] //= num
        n.shape = s
        conf.update(slice_dim=dim, num_slices=num)
    elif t == "kConcate":
        if gen is not None:
            dim, num = gen["concate_dim"], gen.get("num_concates", len(ss))
        else:
            cc = L.get("concate_conf")
            dim = cc.get("concate_dim")
            num = cc.get("num_concates") if cc.spec.fields.get("num_concates") else len(ss)
        if len(ss) < 2:  # B17 in v0.1
            raise _SetupError("a concate layer needs at least 2 sources, got 1" +
                              (" (SINGA v0.1 builds one when a partition_dim -1 layer reads a partitioned layer with "
                               "K = 1, and aborts)" if v1 else ""))
        if not v1 and num != len(ss):
            raise _SetupError(f"concate_conf.num_concates is {num} but the layer has {len(ss)} sources")
        s = list(ss[0])
        if not 0 <= dim < len(s):
            raise _SetupError(f"concate dimension {dim} is out of range for the input {s}")
        for o in ss[1:]:
            if len(o) != len(s) or any(a != b for i, (a, b) in enumerate(zip(o, s)) if i != dim):
                raise _SetupError(f"cannot concatenate {ss[0]} and {o} along dimension {dim}")
        s[dim] = sum(o[dim] for o in ss)
        n.shape = s
        conf.update(concate_dim=dim, num_concates=len(ss))
    else:
        raise _SetupError(f"netc has no shape rule for layer type {t}")


def _setup_all(ctx: _Ctx, order: list[_Node]):
    seen = set()
    for n in order:
        if any(s.failed for s in n.srcs):
            n.failed = True
            continue
        try:
            _setup(ctx, n)
        except _SetupError as e:
            key = (n.lay.origin, str(e))
            if key not in seen:  # once per layer, not per partition / unrolled copy
                seen.add(key)
                ctx.error(f"layer '{n.lay.origin}' (node {n.name}, {n.lay.type}): {e}", n.lay.loc)
            n.failed = True
            continue
        zero = [s for s in [n.shape] + [sh for _, sh in n.params] if 0 in s]
        if zero:  # B14
            ctx.warn(f"layer '{n.lay.origin}' gets a zero-sized tensor {zero[0]} (a size left at its default 0?); "
                     f"SINGA accepts it silently", n.lay.loc, key=("B14", n.lay.origin))
    ctx.check()


def _param_conf(p: _P) -> dict:
    m = p.owner.msg if p.owner is not None else p.msg  # share_from copies the owner's configuration
    if m is None:
        return {}
    init = m.get("init")
    return {"init": init.to_dict(True), "lr_scale": m.get("lr_scale"), "wd_scale": m.get("wd_scale")}


def _layer_conf(L: Msg | None, cache: dict) -> dict:
    if L is None:
        return {}
    d = cache.get(id(L))
    if d is None:
        d = {k: (v.to_dict(True) if isinstance(v, Msg) else v) for k, v in L.vals.items()
             if k.endswith("_conf") or k.startswith("[")}
        cache[id(L)] = d
    return d


def _finish(ctx: _Ctx, order: list[_Node]) -> list[SingaNode]:
    out, cache = [], {}
    pshapes: dict[str, tuple[list, _P]] = {}
    for n in order:
        lay = n.lay
        ps, unnamed = [], 0
        for p, sh in n.params:
            name = p.name
            if ctx.v1 and not p.orig:
                unnamed += 1
                name = n.name + "$" * unnamed
            ps.append(SingaParam(name, sh, p.share_from, p.loc, _param_conf(p)))
            pshapes.setdefault(name, (sh, p))
        out.append(SingaNode(
            name=n.name, layer=lay.name, origin=lay.origin, type=lay.type, srcs=[s.name for s in n.srcs],
            dsts=[d.name for d in n.dsts], pid=n.pid, partition_dim=lay.pdim, num_partitions=n.K,
            shape=list(n.shape), params=ps, conf=dict(n.conf), layer_conf=_layer_conf(lay.proto, cache),
            loc=lay.loc, unroll_index=lay.unroll_index, generated=lay.proto is None,
            batchsize=n.batchsize, record_shape=n.record_shape))
    # share_from needs matching shapes: identical in v0.1, equal element counts in v0.2+
    for node in out:
        for p in node.params:
            if p.share_from and p.share_from in pshapes:
                osh = pshapes[p.share_from][0]
                bad = osh != p.shape if ctx.v1 else math.prod(osh) != math.prod(p.shape)
                if bad:
                    ctx.error(f"param '{p.name}' of layer '{node.origin}' shares from '{p.share_from}', but its shape "
                              f"{p.shape} does not match the owner's {osh}"
                              + (" (SINGA v0.1 needs identical shapes)" if ctx.v1 else " (SINGA needs equal sizes)"),
                              p.loc)
    ctx.check()
    # B15: dead ends
    used: dict[str, bool] = {}
    first: dict[str, SingaNode] = {}
    for node in out:
        if node.generated:
            continue
        used[node.origin] = used.get(node.origin, False) or bool(node.dsts)
        first.setdefault(node.origin, node)
    for origin, u in used.items():
        node = first[origin]
        if not u and node.type not in _TERMINAL and not node.type.startswith("user:"):
            ctx.warn(f"the output of layer '{origin}' ({node.type}) is unused: no layer reads it in phase {ctx.phase} "
                     f"(SINGA builds and runs it anyway)", node.loc, key=("B15", origin))
    return out


# ------------------------------------------------------------------------------------------
# Public API

_VERSION_ALIASES = {"0.1": "0.1", "0.1.0": "0.1", "v0.1": "0.1", "v0.1.0": "0.1",
                    "0.2": "0.2", "0.2.0": "0.2", "v0.2": "0.2", "v0.2.0": "0.2",
                    "0.3": "0.3", "0.3.0": "0.3", "v0.3": "0.3", "v0.3.0": "0.3", "0.3.0-rc3": "0.3",
                    "v0.3.0-rc3": "0.3", "dev": "dev", "pre0.1": "pre0.1", "pre-0.1": "pre0.1"}


class SingaJob:
    """A job file read against its version's schema (see read_job)."""

    def __init__(self, job: Msg, version: str, reason: str, file: str, schema: Schema):
        self.job, self.version, self.reason, self.file, self.schema = job, version, reason, file, schema

    @property
    def phases(self) -> list[str]:
        """The nets SINGA builds for this job (spec 4)."""
        ph = ["kTrain"]
        if self.job.get("test_steps") > 0:
            ph.append("kTest")
        if self.job.get("validate_steps") > 0:
            ph.append("kVal")
        return ph


def _source(path_or_text, file):
    if isinstance(path_or_text, os.PathLike) or (isinstance(path_or_text, str) and _looks_like_path(path_or_text)):
        path = str(path_or_text)
        return _read_text(path), file or path, path
    if not isinstance(path_or_text, str):
        raise NetcError(f"expected a path or the text of a job file, got {type(path_or_text).__name__}")
    return path_or_text, file or "<input>", None


def _alongside_protos(path: str) -> list[str]:
    """User .proto files next to a job file: those whose name starts with the job file's name
    up to and including its last '_' (all *.proto when the name has no '_'):
    '0.2.0_rnnlm_job.conf' -> '0.2.0_rnnlm_*.proto'; 'examples/rnnlm/job.conf' -> 'examples/rnnlm/*.proto'."""
    d, base = os.path.split(os.path.abspath(path))
    prefix = base[:base.rfind("_") + 1] if "_" in base else ""
    try:
        names = sorted(f for f in os.listdir(d) if f.endswith(".proto") and f.startswith(prefix))
    except OSError:
        return []
    return [os.path.join(os.path.dirname(path), f) for f in names]


def read_job(path_or_text, version: str | None = None, *, file: str | None = None,
             extension_protos=None) -> SingaJob:
    """Parse a job file and read it against the schema of `version` (detected when None).
    extension_protos: user .proto files declaring `[ext]` fields; when None and the job is a
    file, the .proto files next to it are loaded the first time an extension is used."""
    text, file, path = _source(path_or_text, file)
    tree = pt.parse_text(text, file)
    detected, reason, where = _detect(tree)
    if version is not None:
        v = _VERSION_ALIASES.get(str(version))
        if v is None:
            raise NetcError(f"unknown SINGA version '{version}' (use one of 0.1, 0.2, 0.3, dev)")
        if not (v == "pre0.1" and detected == "pre0.1"):
            reason = "given"
    else:
        v = detected
    if v == "pre0.1":
        raise _pre01_error(tree, file, reason, where)
    schema = load_schema(v).copy()
    loader = None
    if extension_protos is not None:
        for p in extension_protos:
            load_extension_proto(p, schema)
    elif path is not None:
        todo = _alongside_protos(path)

        def loader(f):
            loaded = False
            while todo:
                load_extension_proto(todo.pop(0), schema)
                loaded = True
            return loaded

    rd = _Reader(schema, v, file, loader)
    job = rd.convert(tree, schema.msg("JobProto"), Loc(file, 1, 1))
    if rd.errors:
        raise NetcError(rd.errors)
    return SingaJob(job, v, reason, file, schema)


# Markers of the pre-0.1 snapshots (spec appendix A): the May-June 2015 ModelProto quotes layer
# types and names confs `*_param`, with a flat updater; the late-June/July ModelProto has enum types,
# `*_conf` confs and `updater { base_lr lr_change ... }`; the July-22 JobProto wraps that model in
# `model { }` next to `cluster { }`.
_PRE01_MAYJUNE = {"base_learning_rate", "learning_rate_change_method", "learning_rate_change_frequency",
                  "datablob", "param_type"}


def _pre01_error(tree, file, reason, where=None):
    old = []   # (what, loc) of May-June markers
    wrapper = None
    for f in tree.fields:
        if f.name == "model" and f.is_message and not f.ext:
            wrapper = f.loc
    stack = [(tree, "")]
    while stack:
        msg, parent = stack.pop()
        for f in msg.fields:
            if f.ext:
                continue
            if f.is_message:
                stack.append((f.value, f.name))
                if f.name.endswith("_param"):
                    old.append((f"'{f.name}'", f.loc))
            elif f.name in _PRE01_MAYJUNE:
                old.append((f"'{f.name}'", f.loc))
            elif f.name == "type" and f.value.kind == "string" and parent in ("layer", "sublayers"):
                old.append((f"the quoted layer type {f.value.text}", f.value.loc))
    old.sort(key=lambda x: (x[1].line, x[1].col))
    if wrapper is not None and old:
        what, loc = old[0]
        d = Diagnostic("error", f"{what} belongs to the May-June 2015 (pre-0.1) ModelProto, but this file uses the "
                       f"July-2015 JobProto (`model {{ }}` wrapper): it parses under no SINGA schema", loc)
        d.note("the `model { }` wrapper is here", wrapper)
        more = ", ".join(f"{w} ({l.line}:{l.col})" for w, l in old[1:6])
        if more:
            d.note(f"other obsolete fields: {more}{', ...' if len(old) > 6 else ''}")
        return NetcError(d)
    if wrapper is not None:
        era = "the July-2015 JobProto with a `model { }` wrapper"
        loc = wrapper
    elif old:
        era = "the May-June 2015 ModelProto (quoted layer types, `*_param` confs, flat updater)"
        loc = old[0][1]
    else:
        era = "the June-July 2015 ModelProto (flat param fields such as init_method, `updater { lr_change }`)"
        loc = where or Loc(file, 1, 1)
    d = Diagnostic("error", f"this file is in a pre-0.1 SINGA dialect, {era} (detected from {reason}); netc reads "
                   f"the job files of SINGA v0.1, v0.2 and v0.3", loc)
    d.note("see the spec's appendix A for the differences; the net has to be rewritten in the v0.1 form")
    return NetcError(d)


def build_singa(path_or_text, phase: str = "train", version: str | None = None, K: int | None = None, *,
                file: str | None = None, extension_protos=None, plugins: dict | None = None,
                record_shapes: dict | None = None, fix_share_from: bool = False,
                diag: DiagnosticEngine | None = None) -> SingaNet:
    """Build the net SINGA builds for `phase` ('train' | 'test' | 'val', or kTrain/kTest/kVal) with K
    partitions (default: cluster.nworkers_per_group for train, 1 otherwise).

    path_or_text: a path, the text of a job file, or a SingaJob from read_job.
    plugins: {user_type: UserLayerRule} for user layers (RNNLM_PLUGIN for the rnnlm example).
    record_shapes: {data layer name: record shape} for v0.1 kShardData/kLMDBData layers
      (default: [28, 28] for MNIST, [3, 32, 32] for CIFAR-10, judged from the path or the parser
      layer reading it -- what SINGA's shard creators write).
    fix_share_from: resolve v0.2+ `share_from: "w"` to the unrolled '0#w' (B1; not SINGA behaviour).
    diag: also report warnings there."""
    job = path_or_text if isinstance(path_or_text, SingaJob) else read_job(
        path_or_text, version, file=file, extension_protos=extension_protos)
    ph = PHASES.get(phase)
    if ph is None:
        raise NetcError(f"unknown phase '{phase}' (use train, test or val)")
    if K is None:
        K = job.job.get("cluster").get("nworkers_per_group") if ph == "kTrain" else 1
    if not isinstance(K, int) or K < 1:
        raise NetcError(f"the number of partitions must be at least 1, got {K}",
                        job.job.get("cluster").at("nworkers_per_group"))
    if not job.job.has("neuralnet"):
        raise NetcError("the job has no 'neuralnet'", Loc(job.file, 1, 1))
    ctx = _Ctx(job.version, job.file, ph, K, plugins, record_shapes, fix_share_from)
    if ctx.v1:
        order = _build_v1(ctx, job.job)
    else:
        order = _sort(ctx, _build_v2(ctx, job.job))
    _setup_all(ctx, order)
    nodes = _finish(ctx, order)
    net = SingaNet(job.file, job.version, ph, K, nodes, ctx.warnings, ctx.non_singa, job.job, job.reason)
    if diag is not None:
        diag.extend(ctx.warnings)
    return net


def build_all(path_or_text, version: str | None = None, **kw) -> dict[str, SingaNet]:
    """Every net the job builds (spec 4): kTrain, plus kTest if test_steps > 0 and kVal if
    validate_steps > 0. Keyword arguments as for build_singa (K applies to the training net)."""
    job = path_or_text if isinstance(path_or_text, SingaJob) else read_job(
        path_or_text, version, file=kw.pop("file", None), extension_protos=kw.pop("extension_protos", None))
    K = kw.pop("K", None)
    return {ph: build_singa(job, ph, K=K if ph == "kTrain" else None, **kw) for ph in job.phases}
