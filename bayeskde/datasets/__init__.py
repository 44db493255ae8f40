"""Data sets: generators and loaders, all offline.

- :mod:`.generators`: strings (Weston et al. 2002, section 4.1), digit halves,
  the S-shape and the arm pose inverse problems;
- :mod:`.sequences`: HMM sequence classes, exon/intron DNA, the ``.ts`` reader.
- :mod:`.sbi`: the eight standard simulation-based-inference tasks of sbibm
  (two moons, a Gaussian mixture, Gaussian linear uniform, Gaussian linear,
  SLCP, a Bernoulli GLM, SIR, Lotka-Volterra) with their reference posteriors.
"""

from .generators import ARM_JOINT_LIMITS as ARM_JOINT_LIMITS
from .generators import ARM_LINK_LENGTHS as ARM_LINK_LENGTHS
from .generators import SSHAPE_NOISE as SSHAPE_NOISE
from .generators import STRING_ALPHABET as STRING_ALPHABET
from .generators import STRING_TARGETS as STRING_TARGETS
from .generators import ArmPose as ArmPose
from .generators import DigitHalves as DigitHalves
from .generators import Digits as Digits
from .generators import SShape as SShape
from .generators import StringPairs as StringPairs
from .generators import arm_forward as arm_forward
from .generators import arm_mirror_pose as arm_mirror_pose
from .generators import load_digits_classification as load_digits_classification
from .generators import load_digits_halves as load_digits_halves
from .generators import make_arm_pose as make_arm_pose
from .generators import make_sshape as make_sshape
from .generators import make_string_pairs as make_string_pairs
from .sbi import SBI_TASKS as SBI_TASKS
from .sbi import SBIBM_VERSION as SBIBM_VERSION
from .sbi import SBIPairs as SBIPairs
from .sbi import SBITask as SBITask
from .sbi import bernoulli_glm as bernoulli_glm
from .sbi import gaussian_linear as gaussian_linear
from .sbi import gaussian_linear_uniform as gaussian_linear_uniform
from .sbi import gaussian_mixture as gaussian_mixture
from .sbi import lotka_volterra as lotka_volterra
from .sbi import make_sbi_pairs as make_sbi_pairs
from .sbi import reference_posterior as reference_posterior
from .sbi import sbi_task as sbi_task
from .sbi import sir as sir
from .sbi import slcp as slcp
from .sbi import two_moons as two_moons
from .sequences import DNA_ALPHABET as DNA_ALPHABET
from .sequences import SequenceDataset as SequenceDataset
from .sequences import TsDataset as TsDataset
from .sequences import exon_intron_hmms as exon_intron_hmms
from .sequences import make_exon_intron as make_exon_intron
from .sequences import make_hmm_classification as make_hmm_classification
from .sequences import read_ts as read_ts
from .sequences import two_class_hmms as two_class_hmms
from .ts import load_ucr as load_ucr

__all__ = [
    "STRING_ALPHABET",
    "STRING_TARGETS",
    "StringPairs",
    "DigitHalves",
    "Digits",
    "make_string_pairs",
    "load_digits_halves",
    "load_digits_classification",
    "SShape",
    "SSHAPE_NOISE",
    "make_sshape",
    "ARM_LINK_LENGTHS",
    "ARM_JOINT_LIMITS",
    "ArmPose",
    "arm_forward",
    "arm_mirror_pose",
    "make_arm_pose",
    "SequenceDataset",
    "TsDataset",
    "two_class_hmms",
    "make_hmm_classification",
    "exon_intron_hmms",
    "make_exon_intron",
    "read_ts",
    "DNA_ALPHABET",
    "load_ucr",
    "SBI_TASKS",
    "SBIBM_VERSION",
    "SBITask",
    "SBIPairs",
    "two_moons",
    "gaussian_mixture",
    "gaussian_linear_uniform",
    "gaussian_linear",
    "slcp",
    "bernoulli_glm",
    "sir",
    "lotka_volterra",
    "sbi_task",
    "make_sbi_pairs",
    "reference_posterior",
]
